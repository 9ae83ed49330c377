// The graph issue 21's benchmarks change — one budget and 100,000 items related to it — and the
// same graph in SQLite kept the way the original Persist kept it, shared by the ordo-one Persist
// suite and `facadespeed`, so both measure the same work.
import BenchSupport
import Foundation
import GRDB
import Persist

/// The number of items in the graph.
public let persistGraphSize = 100_000

/// The graph's root entity.
public struct Budget: Entity {
    public static let entityName = "Budget"
    public var id: UUID
    public var amount: Double

    public init(id: UUID, amount: Double) {
        self.id = id
        self.amount = amount
    }
}

/// One of the graph's items; a benchmark's write changes `budgeted`.
public struct BudgetItem: Entity {
    public static let entityName = "BudgetItem"
    public var id: UUID
    public var label: String
    public var budgeted: Double
    public var date: Date
}

/// Item `index` of the graph (its ID derived from the index), with `budgeted` as given.
public func budgetItem(_ index: Int, budgeted: Double = 0) -> BudgetItem {
    BudgetItem(id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))),
               label: "budget item \(index)", budgeted: budgeted, date: Date(timeIntervalSinceReferenceDate: 600_000_000 + Double(index)))
}

/// Saves the graph through `persister`: the budget, then the items and their relations in
/// transactions of 10,000.
public func saveGraph(with persister: Persister) throws {
    let budget = Budget(id: UUID(), amount: 1)
    try persister.write { try $0.save(budget) }
    for batch in stride(from: 0, to: persistGraphSize, by: 10_000) {
        try persister.write("import") { transaction in
            for index in batch ..< batch + 10_000 {
                try transaction.save(budgetItem(index))
                try transaction.relate(budget.id, to: budgetItem(index).id, as: "items")
            }
        }
    }
}

/// The graph in SQLite, in the original Persist's tables: `by_type(id, type_name, json)`,
/// `relations(from_id, to_id, relation)` and an undo table `by_type_history(operation, id,
/// before_json, after_json)` with a cursor. WAL, `synchronous = FULL`.
public final class PersistGraphInSQLite {
    private let directory: String
    private let queue: DatabaseQueue
    private var counter = 0
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    /// Builds the graph in a new scratch directory named after `scratchName`.
    public init(scratchName: String) throws {
        directory = try POSIX.scratchDirectory(scratchName)
        queue = try DatabaseQueue(path: directory + "/persist.sqlite")
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
        let encoder = self.encoder
        try queue.write { db in
            try db.execute(sql: "INSERT INTO by_type VALUES (?, 'Budget', ?)", arguments: [budget, try encoder.encode(Budget(id: UUID(), amount: 1))])
            for index in 0 ..< persistGraphSize {
                let entity = budgetItem(index)
                try db.execute(sql: "INSERT INTO by_type VALUES (?, 'BudgetItem', ?)", arguments: [entity.id.uuidString, try encoder.encode(entity)])
                try db.execute(sql: "INSERT INTO relations VALUES (?, ?, 'items', ?)", arguments: [budget, entity.id.uuidString, index])
            }
        }
    }

    /// One entity changed (its JSON encoded here, as Persist's is inside its write), with its
    /// before and after JSON in the undo table, in one transaction that also drops the redo rows
    /// and moves the cursor.
    public func writeOne() throws {
        counter += 1
        let changed = budgetItem(counter * 7919 % persistGraphSize, budgeted: Double(counter))
        let json = try encoder.encode(changed)
        try queue.write { db in
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
    public func move(forward: Bool) throws {
        try queue.write { db in
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

    /// Deletes the scratch directory.
    public func remove() { POSIX.removeTree(directory) }
}
