// The async twins of Persister's blocking methods: the same names and semantics (GRDB's
// convention; in async code the compiler picks these and asks for `await`).
//
// Owns: blocking work never runs on the cooperative pool. Each call runs its blocking twin on a
// thread of its own (`offload`). Cancellation as `Store`'s twins: a task cancelled before the call
// starts gets `CancellationError`; a write, undo or redo cancelled before its transaction starts
// commits nothing; once it runs, it completes and the caller learns its outcome.
import ContentStore
import Foundation
import Synchronization

extension Persister {
    /// The entity with `id`, or nil (``fetch(_:id:)-(E.Type,UUID)``).
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) async throws -> E? {
        try await offload { _ in try self.fetch(type, id: id) }
    }

    /// Every entity of the type, sorted by ID (``fetchAll(_:)-(E.Type)``).
    public func fetchAll<E: Entity>(_ type: E.Type) async throws -> [E] {
        try await offload { _ in try self.fetchAll(type) }
    }

    /// The targets of `source`'s relations named `relation`, in relate order (``related(_:from:as:)-(E.Type,UUID,String)``).
    public func related<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) async throws -> [E] {
        try await offload { _ in try self.related(type, from: source, as: relation) }
    }

    /// Runs `body` on one consistent state of the graph (``read(_:)-(_)``).
    public func read<T: Sendable>(_ body: @Sendable (PersistSnapshot) throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            try await offload { _ in try self.read(body) }
        }
    }

    /// Runs `body` as one atomic, durable transaction and undo step (``write(_:_:)-(String?,_)``).
    @discardableResult
    public func write<T: Sendable>(_ actionName: String? = nil, _ body: @Sendable (inout PersistTransaction) throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            try await offload { isCancelled in try self.write(actionName, isCancelled: isCancelled, body) }
        }
    }

    /// Reverts the last undoable step in one commit (``undo()-()``); nil when there is nothing to undo.
    @discardableResult
    public func undo() async throws -> UndoStep? {
        try await offload { isCancelled in try self.move(.undo, isCancelled: isCancelled) }
    }

    /// Re-applies the step the last undo reverted in one commit (``redo()-()``); nil when there is none.
    @discardableResult
    public func redo() async throws -> UndoStep? {
        try await offload { isCancelled in try self.move(.redo, isCancelled: isCancelled) }
    }

    /// Every step kept, oldest first, and how many are undoable (``history()-()``).
    public func history() async throws -> (steps: [UndoStep], cursor: Int) {
        let history = try await offload { _ in
            let history = try self.history()
            return History(steps: history.steps, cursor: history.cursor)
        }
        return (history.steps, history.cursor)
    }

    /// Drops the oldest steps so that at most `count` remain (``pruneHistory(keepingLast:)-(Int)``).
    public func pruneHistory(keepingLast count: Int) async throws {
        try await offload { _ in try self.pruneHistory(keepingLast: count) }
    }

    /// A tuple is not `Sendable`; this carries `history()` across the thread hop.
    private struct History: Sendable {
        var steps: [UndoStep]
        var cursor: Int
    }

    /// Runs `work` on a thread of its own and returns what it returns. `work` is handed whether the
    /// calling task has been cancelled meanwhile; a task cancelled before it starts gets
    /// `CancellationError` without it running.
    private func offload<T: Sendable>(_ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws -> T) async throws -> T {
        try Task.checkCancellation()
        let cancelled = CancellationFlag()
        // The thread lets go of `work` before it resumes the caller: callers pass closures that
        // only pretend to escape (`withoutActuallyEscaping`), which must be released by then.
        let pending = Mutex<(@Sendable (_ isCancelled: () -> Bool) throws -> T)?>(work)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                Thread.detachNewThread {
                    let result: Result<T, any Error>
                    do {
                        let work = pending.withLock { $0.take() }!
                        result = Result {
                            if cancelled.isSet { throw CancellationError() }
                            return try work { cancelled.isSet }
                        }
                    }
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            cancelled.set()
        }
    }
}

/// A task's cancellation, readable from the thread that does its blocking work.
private final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
