import BenchSupport
import ContentStore
import Foundation
import Persist
import PersistGraph

/// Persist on a graph of one budget and 100,000 items related to it: a write of one item, its
/// undo, its redo.
final class PersistContenders {
    private let fixture: StoreFixture
    private let persister: Persister
    private var counter = 0

    init() throws {
        fixture = try StoreFixture("facadespeed-persist")
        persister = try Persister(store: fixture.store)
        try saveGraph(with: persister)
    }

    var contenders: [Contender] {
        [Contender(names: ["p.write", "p.undo", "p.redo"]) { [self] in
            [try writeOne(), try measure { _ = try persister.undo() }, try measure { _ = try persister.redo() }]
        },
         Contender(name: "p.1KiB") { [self] in try commitKibibyte() }]
    }

    /// The reference commit on this store: what any commit costs on a store of 400,000 records
    /// (each commit copies the record tree's path to its key, cold in the cache), Persist aside.
    private func commitKibibyte() throws -> Sample {
        counter += 1
        return try facadespeed.commitKibibyte(on: fixture.store, counter: counter)
    }

    private func writeOne() throws -> Sample {
        counter += 1
        let changed = budgetItem(counter * 7919 % persistGraphSize, budgeted: Double(counter))
        let persister = self.persister
        return try measure { try persister.write("Edit") { try $0.save(changed) } }
    }

    func remove() { fixture.remove() }
}
