// The async twins of Persister's blocking methods: the same names and semantics (GRDB's
// convention; in async code the compiler picks these and asks for `await`).
//
// Each runs its store work through `Store`'s own async twins, so blocking work (I/O, fsync,
// waiting for a group commit) runs on the store's I/O threads, never on the cooperative pool, and
// cancellation is `Store`'s: a write, undo or redo whose task is cancelled before its transaction
// starts throws `CancellationError` and commits nothing; once it runs, it completes and the caller
// learns its outcome.
import ContentStore
import Foundation

extension Persister {
    /// The entity with `id`, or nil (the twin of the blocking `fetch`).
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) async throws -> E? {
        try await read { try $0.fetch(type, id: id) }
    }

    /// Every entity of the type, sorted by ID (the twin of the blocking `fetchAll`).
    public func fetchAll<E: Entity>(_ type: E.Type) async throws -> [E] {
        try await read { try $0.fetchAll(type) }
    }

    /// The targets of `source`'s relations named `relation`, in relate order (the twin of the blocking `related`).
    public func related<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) async throws -> [E] {
        try await read { try $0.related(type, from: source, as: relation) }
    }

    /// Runs `body` on one consistent state of the graph (the twin of the blocking `read`).
    public func read<T: Sendable>(_ body: @Sendable (PersistSnapshot) throws -> T) async throws -> T {
        let layout = layout
        return try await store.read { try body(PersistSnapshot(snapshot: $0, layout: layout)) }
    }

    /// Runs `body` as one atomic, durable transaction and undo step (the twin of the blocking `write`).
    @discardableResult
    public func write<T: Sendable>(_ actionName: String? = nil, _ body: @Sendable (inout PersistTransaction) throws -> T) async throws -> T {
        try await shared.committing {
            try await store.write { transaction in try self.applyWrite(actionName, body, to: &transaction) }
        }
    }

    /// Reverts the last undoable step in one commit; nil when there is nothing to undo (the twin of the blocking `undo`).
    @discardableResult
    public func undo() async throws -> UndoStep? {
        try await shared.committing {
            try await store.write { transaction in try self.applyMove(.undo, to: &transaction) }
        }
    }

    /// Re-applies the step the last undo reverted in one commit; nil when there is none (the twin of the blocking `redo`).
    @discardableResult
    public func redo() async throws -> UndoStep? {
        try await shared.committing {
            try await store.write { transaction in try self.applyMove(.redo, to: &transaction) }
        }
    }

    /// Every step kept, oldest first, and how many are undoable (the twin of the blocking `history`).
    public func history() async throws -> (steps: [UndoStep], cursor: Int) {
        let history = try await store.read { try self.readHistory(in: $0) }
        return (history.steps, history.cursor)
    }

    /// Drops the oldest steps so that at most `count` remain (the twin of the blocking `pruneHistory`).
    public func pruneHistory(keepingLast count: Int) async throws {
        try checkPruneCount(count)
        try await store.write { transaction in try self.applyPrune(keepingLast: count, to: &transaction) }
    }
}
