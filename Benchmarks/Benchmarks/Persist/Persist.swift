// Persist (issue 21): a write that changes one entity in a graph of 100,000, its undo and its
// redo — each one durable commit — beside a durable 1 KiB commit of the bare store, and beside
// SQLite (GRDB) doing the same change the way the original Persist did: the entity's JSON row in
// `by_type` and a before/after row in its own undo table, in one durable transaction.
//
// The graph: one budget and 100,000 items, each related to the budget (relations "items").
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Persist
import PersistGraph

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
/// A store holding the 100,000-entity graph, built once and shared by the write, undo and redo
/// cases (in that order; redo's teardown removes it).
private final class PersistState: @unchecked Sendable {
    var fixture: StoreFixture?
    var persister: Persister?
    var counter = 0

    func setUp() throws {
        guard fixture == nil else { return }
        let fixture = try StoreFixture("persist-graph")
        let persister = try Persister(store: fixture.store)
        try saveGraph(with: persister)
        self.fixture = fixture
        self.persister = persister
    }

    /// One entity changed: a new amount for an item somewhere in the graph.
    func writeOne() throws {
        counter += 1
        let changed = budgetItem(counter * 7919 % persistGraphSize, budgeted: Double(counter))
        try persister!.write("Edit") { try $0.save(changed) }
    }

    func remove() {
        fixture?.remove()
        fixture = nil
        persister = nil
    }
}

/// The graph in SQLite with its own undo table (`PersistGraphInSQLite`), built once and shared by
/// the GRDB cases (redo's teardown removes it).
private final class GRDBState: @unchecked Sendable {
    private var graph: PersistGraphInSQLite?

    func setUp() throws {
        guard graph == nil else { return }
        graph = try PersistGraphInSQLite(scratchName: "persist-grdb")
    }

    func writeOne() throws { try graph!.writeOne() }
    func move(forward: Bool) throws { try graph!.move(forward: forward) }

    func remove() {
        graph?.remove()
        graph = nil
    }
}

let benchmarks: @Sendable () -> Void = {
    let configuration = { (setup: @escaping @Sendable () throws -> Void, teardown: @escaping @Sendable () -> Void) in
        Benchmark.Configuration(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000, setup: setup, teardown: teardown)
    }

    // The reference: one durable commit of a 1 KiB record.
    let bare = PersistState()
    Benchmark("store: durable 1 KiB commit", configuration: configuration({ bare.fixture = try StoreFixture("persist-bare") }, { bare.remove() })) { benchmark in
        bare.counter += 1
        var value = Data(repeating: 0x42, count: 1024)
        value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(bare.counter), as: UInt64.self) }
        do { try bare.fixture!.store.write { try $0.setRecord(Record(value: value), forKey: "key\(bare.counter % 1024)") } } catch { benchmark.error("\(error)") }
    }

    let graph = PersistState()
    Benchmark("Persist: write one entity in a graph of 100,000", configuration: configuration({ try graph.setUp() }, {})) { benchmark in
        do { try graph.writeOne() } catch { benchmark.error("\(error)") }
    }
    Benchmark("Persist: undo one step (graph of 100,000)", configuration: configuration({ try graph.setUp() }, {})) { benchmark in
        do {
            // Writes as needed, so there is always a step to undo; only the undo is measured.
            if !graph.persister!.canUndo || graph.counter == 0 {
                benchmark.stopMeasurement()
                try graph.writeOne()
                benchmark.startMeasurement()
            }
            try graph.persister!.undo()
        } catch { benchmark.error("\(error)") }
    }
    Benchmark("Persist: redo one step (graph of 100,000)", configuration: configuration({ try graph.setUp() }, { graph.remove() })) { benchmark in
        do {
            if !graph.persister!.canRedo {
                benchmark.stopMeasurement()
                for _ in 0 ..< 500 { try graph.writeOne() }
                for _ in 0 ..< 500 { try graph.persister!.undo() }
                benchmark.startMeasurement()
            }
            try graph.persister!.redo()
        } catch { benchmark.error("\(error)") }
    }

    let sqlite = GRDBState()
    Benchmark("GRDB: write one entity with its undo row (graph of 100,000)", configuration: configuration({ try sqlite.setUp() }, {})) { benchmark in
        do { try sqlite.writeOne() } catch { benchmark.error("\(error)") }
    }
    Benchmark("GRDB: undo one step (graph of 100,000)", configuration: configuration({ try sqlite.setUp() }, {})) { benchmark in
        do {
            benchmark.stopMeasurement()
            try sqlite.writeOne()
            benchmark.startMeasurement()
            try sqlite.move(forward: false)
        } catch { benchmark.error("\(error)") }
    }
    Benchmark("GRDB: redo one step (graph of 100,000)", configuration: configuration({ try sqlite.setUp() }, { sqlite.remove() })) { benchmark in
        do {
            benchmark.stopMeasurement()
            try sqlite.writeOne()
            try sqlite.move(forward: false)
            benchmark.startMeasurement()
            try sqlite.move(forward: true)
        } catch { benchmark.error("\(error)") }
    }
}
