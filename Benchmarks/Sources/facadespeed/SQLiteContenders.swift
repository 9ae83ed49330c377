import BenchSupport
import Foundation
import GRDB

/// The same graph in SQLite, in the original Persist's tables (the ordo-one Persist suite's
/// `GRDBState`): `by_type(id, type_name, json)`, `relations`, and an undo table
/// `by_type_history(operation, id, before_json, after_json)` with a cursor. WAL, synchronous FULL.
final class SQLiteContenders {
    private let directory: String
    private let queue: DatabaseQueue
    private var counter = 0
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    init() throws {
        directory = try POSIX.scratchDirectory("facadespeed-grdb")
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
            for index in 0 ..< graphSize {
                let entity = item(index)
                try db.execute(sql: "INSERT INTO by_type VALUES (?, 'BudgetItem', ?)", arguments: [entity.id.uuidString, try encoder.encode(entity)])
                try db.execute(sql: "INSERT INTO relations VALUES (?, ?, 'items', ?)", arguments: [budget, entity.id.uuidString, index])
            }
        }
    }

    var contenders: [Contender] {
        [Contender(names: ["g.write", "g.undo", "g.redo"]) { [self] in
            [try measure { try writeOne() }, try measure { try move(forward: false) }, try measure { try move(forward: true) }]
        }]
    }

    /// One entity changed (its JSON encoded inside the timed part, as Persist's is), with its
    /// before and after JSON in the undo table, in one transaction that also drops the redo rows
    /// and moves the cursor.
    private func writeOne() throws {
        counter += 1
        let changed = item(counter * 7919 % graphSize, budgeted: Double(counter))
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
    private func move(forward: Bool) throws {
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

    func remove() { POSIX.removeTree(directory) }
}
