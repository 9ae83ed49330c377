import BenchSupport
import Foundation
import PersistGraph

/// GRDB (SQLite) keeping the Persist graph in the original Persist's tables with its own undo
/// table (`PersistGraphInSQLite`, the ordo-one Persist suite's peer too): a write of one item,
/// its undo, its redo.
final class SQLiteContenders {
    private let graph: PersistGraphInSQLite

    init() throws {
        graph = try PersistGraphInSQLite(scratchName: "facadespeed-grdb")
    }

    var contenders: [Contender] {
        [Contender(names: ["g.write", "g.undo", "g.redo"]) { [self] in
            [try measure { try graph.writeOne() }, try measure { try graph.move(forward: false) }, try measure { try graph.move(forward: true) }]
        }]
    }

    func remove() { graph.remove() }
}
