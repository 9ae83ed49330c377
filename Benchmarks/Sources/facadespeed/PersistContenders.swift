import BenchSupport
import ContentStore
import Foundation
import Persist

let graphSize = 100_000

struct Budget: Entity {
    static let entityName = "Budget"
    var id: UUID
    var amount: Double
}

struct BudgetItem: Entity {
    static let entityName = "BudgetItem"
    var id: UUID
    var label: String
    var budgeted: Double
    var date: Date
}

func item(_ index: Int, budgeted: Double = 0) -> BudgetItem {
    BudgetItem(id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))),
               label: "budget item \(index)", budgeted: budgeted, date: Date(timeIntervalSinceReferenceDate: 600_000_000 + Double(index)))
}

/// Persist on a graph of one budget and 100,000 items related to it: a write of one item, its
/// undo, its redo.
final class PersistContenders {
    private let fixture: StoreFixture
    private let persister: Persister
    private var counter = 0

    init() throws {
        fixture = try StoreFixture("facadespeed-persist")
        persister = try Persister(store: fixture.store)
        let budget = Budget(id: UUID(), amount: 1)
        try persister.write { try $0.save(budget) }
        for batch in stride(from: 0, to: graphSize, by: 10_000) {
            try persister.write("import") { transaction in
                for index in batch ..< batch + 10_000 {
                    try transaction.save(item(index))
                    try transaction.relate(budget.id, to: item(index).id, as: "items")
                }
            }
        }
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
        var value = Data(repeating: 0x61, count: 1024)
        withUnsafeBytes(of: counter) { value.replaceSubrange(0 ..< 8, with: $0) }
        let store = fixture.store
        return try measure { try store.write { try $0.setRecord(Record(value: value), forKey: "baseline") } }
    }

    private func writeOne() throws -> Sample {
        counter += 1
        let changed = item(counter * 7919 % graphSize, budgeted: Double(counter))
        let persister = self.persister
        return try measure { try persister.write("Edit") { try $0.save(changed) } }
    }

    func remove() { fixture.remove() }
}
