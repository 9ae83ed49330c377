import Foundation

/// One step of a persister's history: a write that changed something, undoable and redoable.
public struct UndoStep: Hashable, Sendable {
    /// The step's number: increasing in the order of writes, never reused (not even after an undo
    /// and a new write drop the redo steps).
    public var sequence: UInt64
    /// The name the write was given (``Persister/write(_:_:)``), for an "Undo <action>" menu item.
    public var actionName: String?
    /// When the write committed, by the store's clock (`Store.Configuration.now`), at full precision.
    public var date: Date

    /// A step; Persist makes these, tests and callers compare with them.
    public init(sequence: UInt64, actionName: String?, date: Date) {
        self.sequence = sequence
        self.actionName = actionName
        self.date = date
    }
}

/// What one committed write, undo or redo changed, as ``Persister/changes()`` delivers it.
public struct PersistChange: Hashable, Sendable {
    /// The step written, undone or redone.
    public var step: UndoStep
    /// Which of the three it was.
    public var kind: Kind
    /// The entities whose body was saved or deleted, and both ends of every relation made or removed.
    public var changed: Set<UUID>

    /// Whether a change wrote a new step or moved through the history.
    public enum Kind: Hashable, Sendable {
        /// A ``Persister/write(_:_:)`` that changed something.
        case write
        /// ``Persister/undo()``.
        case undo
        /// ``Persister/redo()``.
        case redo
    }

    /// A change; Persist makes these.
    public init(step: UndoStep, kind: Kind, changed: Set<UUID>) {
        self.step = step
        self.kind = kind
        self.changed = changed
    }
}
