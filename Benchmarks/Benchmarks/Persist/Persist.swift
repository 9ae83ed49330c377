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
import GRDB
import Persist

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
private let graphSize = 100_000

private struct Budget: Entity {
    static let entityName = "Budget"
    var id: UUID
    var amount: Double
}

private struct BudgetItem: Entity {
    static let entityName = "BudgetItem"
    var id: UUID
    var label: String
    var budgeted: Double
    var date: Date
}

private func item(_ index: Int, budgeted: Double = 0) -> BudgetItem {
    BudgetItem(id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))),
               label: "budget item \(index)", budgeted: budgeted, date: Date(timeIntervalSinceReferenceDate: 600_000_000 + Double(index)))
}

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
        self.fixture = fixture
        self.persister = persister
    }

    /// One entity changed: a new amount for an item somewhere in the graph.
    func writeOne() throws {
        counter += 1
        let changed = item(counter * 7919 % graphSize, budgeted: Double(counter))
        try persister!.write("Edit") { try $0.save(changed) }
    }

    func remove() {
        fixture?.remove()
        fixture = nil
        persister = nil
    }
}

/// The same graph in SQLite, in the original Persist's tables: `by_type(id, type_name, json)`,
/// `relations(from_id, to_id, relation)` and an undo table `by_type_history(operation, id,
/// before_json, after_json)` with a cursor. WAL, `synchronous = FULL`.
private final class GRDBState: @unchecked Sendable {
    var directory: String?
    var queue: DatabaseQueue?
    var counter = 0
    let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    func setUp() throws {
        guard queue == nil else { return }
        let directory = try POSIX.scratchDirectory("persist-grdb")
        let queue = try DatabaseQueue(path: directory + "/persist.sqlite")
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: """
                CREATE TABLE by_type(id TEXT PRIMARY KEY NOT NULL, type_name TEXT NOT NULL, json BLOB NOT NULL);
                CREATE INDEX by_type_name ON by_type(type_name);
                CREATE TABLE relations(from_id TEXT NOT NULL, to_id TEXT NOT NULL, relation TEXT NOT NULL, position INTEGER NOT NULL,
                                       PRIMARY KEY(from_id, relation, to_id));
                CREATE INDEX relations_to ON relations(to_id);
                CREATE TABLE by_type_history(operation INTEGER NOT NULL, id TEXT NOT NULL, type_name TEXT NOT NULL,
                                             before_json BLOB, after_json BLOB);
                CREATE INDEX history_operation ON by_type_history(operation);
                CREATE TABLE undo_state(cursor INTEGER NOT NULL, last INTEGER NOT NULL);
                INSERT INTO undo_state VALUES (0, 0);
                """)
        }
        let budget = UUID().uuidString
        try queue.write { db in
            try db.execute(sql: "INSERT INTO by_type VALUES (?, 'Budget', ?)", arguments: [budget, try encoder.encode(Budget(id: UUID(), amount: 1))])
            for index in 0 ..< graphSize {
                let entity = item(index)
                try db.execute(sql: "INSERT INTO by_type VALUES (?, 'BudgetItem', ?)", arguments: [entity.id.uuidString, try encoder.encode(entity)])
                try db.execute(sql: "INSERT INTO relations VALUES (?, ?, 'items', ?)", arguments: [budget, entity.id.uuidString, index])
            }
        }
        self.directory = directory
        self.queue = queue
    }

    /// One entity changed, with its before and after JSON in the undo table, as one transaction
    /// that also drops the redo rows and moves the cursor.
    func writeOne() throws {
        counter += 1
        let changed = item(counter * 7919 % graphSize, budgeted: Double(counter))
        let json = try encoder.encode(changed)
        try queue!.write { db in
            let cursor = try Int.fetchOne(db, sql: "SELECT cursor FROM undo_state")!
            let before = try Data.fetchOne(db, sql: "SELECT json FROM by_type WHERE id = ?", arguments: [changed.id.uuidString])
            try db.execute(sql: "DELETE FROM by_type_history WHERE operation > ?", arguments: [cursor])
            try db.execute(sql: "INSERT INTO by_type_history VALUES (?, ?, 'BudgetItem', ?, ?)",
                           arguments: [cursor + 1, changed.id.uuidString, before, json])
            try db.execute(sql: "INSERT OR REPLACE INTO by_type VALUES (?, 'BudgetItem', ?)", arguments: [changed.id.uuidString, json])
            try db.execute(sql: "UPDATE undo_state SET cursor = ?, last = ?", arguments: [cursor + 1, cursor + 1])
        }
    }

    /// Undo (`forward: false`) or redo of the step at the cursor, in one transaction.
    func move(forward: Bool) throws {
        try queue!.write { db in
            let cursor = try Int.fetchOne(db, sql: "SELECT cursor FROM undo_state")!
            let operation = forward ? cursor + 1 : cursor
            let rows = try Row.fetchAll(db, sql: "SELECT id, before_json, after_json FROM by_type_history WHERE operation = ?", arguments: [operation])
            for row in rows {
                let json: Data? = forward ? row["after_json"] : row["before_json"]
                if let json {
                    try db.execute(sql: "INSERT OR REPLACE INTO by_type VALUES (?, 'BudgetItem', ?)", arguments: [row["id"] as String, json])
                } else {
                    try db.execute(sql: "DELETE FROM by_type WHERE id = ?", arguments: [row["id"] as String])
                }
            }
            try db.execute(sql: "UPDATE undo_state SET cursor = ?", arguments: [forward ? cursor + 1 : cursor - 1])
        }
    }

    func remove() {
        queue = nil
        if let directory { POSIX.removeTree(directory) }
        directory = nil
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
