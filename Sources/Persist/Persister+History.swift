// Owns: the undo history. Steps sit at positions `first...last` (Head); a write puts its step at
// `cursor + 1` and drops the ones after it; undo applies the step at `cursor`'s "before" side and
// redo the step at `cursor + 1`'s "after" side, each in the same commit that moves the cursor, so
// the graph is always the result of the steps up to the cursor.
import ContentStore
import Foundation

extension Persister {
    /// Whether ``undo()`` has a step to revert. False when the store cannot be read.
    public var canUndo: Bool { (try? head())?.canUndo ?? false }

    /// Whether ``redo()`` has a step to re-apply. False when the store cannot be read.
    public var canRedo: Bool { (try? head())?.canRedo ?? false }

    /// Reverts exactly the last undoable step's entities and relations, in one atomic, durable commit.
    ///
    /// - Returns: The step undone, or nil when there is nothing to undo.
    @discardableResult
    public func undo() throws -> UndoStep? {
        try shared.committing { try store.write { try applyMove(.undo, to: &$0) } }
    }

    /// Re-applies the step the last ``undo()`` reverted, in one atomic, durable commit.
    ///
    /// - Returns: The step redone, or nil when there is nothing to redo.
    @discardableResult
    public func redo() throws -> UndoStep? {
        try shared.committing { try store.write { try applyMove(.redo, to: &$0) } }
    }

    /// Every step kept, oldest first, and how many of them are undoable (the rest are redoable).
    public func history() throws -> (steps: [UndoStep], cursor: Int) {
        let history = try store.read { try readHistory(in: $0) }
        return (history.steps, history.cursor)
    }

    /// Drops the oldest steps so that at most `count` remain, in one commit. What only the dropped
    /// steps referenced (old bodies, their diffs) is then garbage for `Store.collectGarbage`.
    ///
    /// Redo steps can be redone only in order from the first, so when `count` would drop the first
    /// redo step, every redo step goes.
    ///
    /// - Throws: `StoreError` `invalidArgument` for a negative count.
    public func pruneHistory(keepingLast count: Int) throws {
        try checkPruneCount(count)
        try store.write { try applyPrune(keepingLast: count, to: &$0) }
    }

    // MARK: Internals

    /// A tuple is not `Sendable`; this carries ``history()`` out of a store read.
    struct History: Sendable {
        var steps: [UndoStep]
        var cursor: Int
    }

    func readHistory(in snapshot: Snapshot) throws -> History {
        let head = try Head(snapshot.record(forKey: layout.head), key: layout.head)
        guard head.last >= head.first else { return History(steps: [], cursor: 0) }
        let steps = try (head.first ... head.last).map { try step(at: $0, in: snapshot.record(forKey:)).step }
        return History(steps: steps, cursor: head.undoableCount)
    }

    func checkPruneCount(_ count: Int) throws {
        guard count >= 0 else {
            throw StoreError(code: .invalidArgument, message: "pruneHistory(keepingLast:) needs a count of at least 0, not \(count)")
        }
    }

    /// The body of a prune's store transaction.
    func applyPrune(keepingLast count: Int, to transaction: inout Transaction) throws {
        var head = try Head(transaction.record(forKey: layout.head), key: layout.head)
        guard head.last >= head.first, head.last - head.first + 1 > UInt64(count) else { return }
        var first = head.last + 1 - UInt64(count)
        if first > head.cursor + 1 {
            for position in head.cursor + 1 ... head.last { try transaction.removeRecord(forKey: layout.step(position)) }
            head.last = head.cursor
            first = head.cursor + 1
        }
        for position in head.first ..< first { try transaction.removeRecord(forKey: layout.step(position)) }
        head.first = first
        try transaction.setRecord(head.record, forKey: layout.head)
    }

    /// Records `diff` as the step after the cursor, dropping the redo steps. REQUIRES: inside the
    /// write that made the diff, with `head` as that write read it.
    func recordStep(_ diff: Diff, named actionName: String?, head: inout Head, in transaction: inout Transaction) throws -> SharedState.PendingChange {
        let bytes = diff.blob
        let location = bytes.count <= Diff.inlineLimit ? StepRecord.DiffLocation.inline(bytes) : .blob(try store.put(bytes))
        let position = head.cursor + 1
        if head.last > position {
            for dropped in position + 1 ... head.last { try transaction.removeRecord(forKey: layout.step(dropped)) }
        }
        let step = UndoStep(sequence: head.nextSequence, actionName: actionName, date: store.configuration.now())
        try transaction.setRecord(StepRecord(step: step, diff: location, bodies: diff.digests).record, forKey: layout.step(position))
        head.nextSequence += 1
        head.changeCount += 1
        head.cursor = position
        head.last = position
        try transaction.setRecord(head.record, forKey: layout.head)
        return SharedState.PendingChange(step: step, kind: .write, diff: diff, layout: layout)
    }

    /// The body of an undo's or redo's store transaction.
    func applyMove(_ kind: PersistChange.Kind, to transaction: inout Transaction) throws -> SharedState.Committed<UndoStep?> {
        var head = try head(in: transaction)
        let position: UInt64
        switch kind {
        case .undo:
            guard head.canUndo else { return SharedState.Committed(result: nil) }
            position = head.cursor
        case .redo, .write:
            guard head.canRedo else { return SharedState.Committed(result: nil) }
            position = head.cursor + 1
        }
        let stored = try step(at: position, in: transaction.record(forKey:))
        let diff = try stored.diff(in: store, key: layout.step(position))
        for change in diff.changes {
            let record = kind == .undo ? change.before : change.after
            if let record {
                try transaction.setRecord(record, forKey: change.key)
            } else {
                try transaction.removeRecord(forKey: change.key)
            }
        }
        head.cursor = kind == .undo ? position - 1 : position
        head.changeCount += 1
        try transaction.setRecord(head.record, forKey: layout.head)
        let change = SharedState.PendingChange(step: stored.step, kind: kind, diff: diff, layout: layout)
        return SharedState.Committed(result: stored.step, change: change, head: head, in: transaction)
    }

    private func step(at position: UInt64, in record: (String) throws -> Record?) throws -> StepRecord {
        let key = layout.step(position)
        guard let stored = try record(key) else { throw RecordFormat.corrupted("the history's step is missing", key: key) }
        return try StepRecord(stored, key: key)
    }
}
