import ContentStore
import Foundation

/// A graph of `Codable` entities and named relations, kept in a ContentStore `Store`, with an undo
/// history that survives closing, reopening and a killed process.
///
/// ```swift
/// let persister = try Persister(store: store)
/// try persister.write("Add budget") { transaction in
///     try transaction.save(budget)
///     try transaction.save(item)
///     try transaction.relate(budget.id, to: item.id, as: "items", cascadeDelete: true)
/// }
/// let items = try persister.related(BudgetItem.self, from: budget.id, as: "items")
/// try persister.undo()
/// ```
///
/// Every ``write(_:_:)``, ``undo()`` and ``redo()`` is one atomic, durable commit of the store.
/// A write that changes something is one undo step; one that changes nothing records none and
/// keeps the redo steps. Persisters with different names on one store are independent; two
/// opened on the same `Store` with the same name share their state and both notify.
/// The record layout is in `Internal/RecordLayout.swift` and Docs/persist.md.
public final class Persister: Sendable {
    /// The store the graph lives in.
    public let store: Store
    /// The persister's name: its graph and history are its own.
    public let name: String
    let layout: Layout
    let shared: SharedState

    /// Opens the persister named `name` on `store`, empty the first time.
    ///
    /// - Throws: ``PersistError/invalidName(_:)`` for a name that is empty, contains NUL or is over
    ///   256 UTF-8 bytes; the store's errors (a closed store, a history written by a newer format).
    public init(store: Store, name: String = "default") throws {
        try Names.validate(name)
        let layout = Layout(name: name)
        let head = { try Head(store.record(forKey: layout.head), key: layout.head) }
        let current = try head()
        self.store = store
        self.name = name
        self.layout = layout
        shared = try SharedState.shared(store: store, name: name) { current.changeCount }
    }

    // MARK: Reading

    /// The entity with `id`, or nil when there is none.
    ///
    /// - Throws: ``PersistError/typeMismatch(_:expected:found:)`` when it is stored as another
    ///   entity, ``PersistError/undecodable(entity:id:underlying:)`` when its body does not decode.
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) throws -> E? {
        try read { try $0.fetch(type, id: id) }
    }

    /// Every entity of the type, sorted by ID.
    public func fetchAll<E: Entity>(_ type: E.Type) throws -> [E] {
        try read { try $0.fetchAll(type) }
    }

    /// The targets of `source`'s relations named `relation`, in the order they were related.
    ///
    /// - Throws: ``PersistError/typeMismatch(_:expected:found:)`` when a target is another type's.
    public func related<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) throws -> [E] {
        try read { try $0.related(type, from: source, as: relation) }
    }

    /// Runs `body` on one consistent state of the graph. Writers are not blocked.
    public func read<T>(_ body: (PersistSnapshot) throws -> T) throws -> T {
        try store.read { try body(PersistSnapshot(snapshot: $0, layout: layout)) }
    }

    // MARK: Writing

    /// Runs `body` as one atomic, durable transaction and records it as one undo step named
    /// `actionName`.
    ///
    /// All or nothing: if `body` (or the commit) throws, nothing changes, not the graph and not the
    /// history. A body that changes nothing records no step and keeps the redo steps; one that
    /// changes something drops them. Writes run one at a time, each seeing the last.
    @discardableResult
    public func write<T>(_ actionName: String? = nil, _ body: (inout PersistTransaction) throws -> T) throws -> T {
        try shared.committing {
            try store.write { transaction in try applyWrite(actionName, body, to: &transaction) }
        }
    }

    /// The body of a write's store transaction: runs `body`, and records what it changed as a step.
    func applyWrite<T>(_ actionName: String?, _ body: (inout PersistTransaction) throws -> T,
                       to transaction: inout Transaction) throws -> SharedState.Committed<T> {
        var head = try head(in: transaction)
        var persist = PersistTransaction(transaction: transaction, layout: layout, store: store, order: head.changeCount + 1)
        let result = try body(&persist)
        let diff = try persist.diff()
        guard !diff.changes.isEmpty else { return SharedState.Committed(result: result) }
        transaction = persist.transaction
        let change = try recordStep(diff, named: actionName, head: &head, in: &transaction)
        return SharedState.Committed(result: result, change: change, head: head, in: transaction)
    }

    /// A stream of every committed write, undo and redo of this persister (and of every persister
    /// opened on the same store and name in this process), in commit order, from now on. Each is
    /// delivered after it is durable. The stream ends when the last such persister is released.
    public func changes() -> AsyncStream<PersistChange> {
        shared.changes()
    }

    /// The history's position as committed.
    func head() throws -> Head {
        try Head(store.record(forKey: layout.head), key: layout.head)
    }

    /// The history's position as `transaction` sees it: the head this process last wrote when no
    /// commit since changed it, as the store remembers (a lookup in a large store is a walk of cold
    /// nodes, and an app commits other records between two writes: facadespeed's `p.1KiB`).
    func head(in transaction: Transaction) throws -> Head {
        guard let known = shared.knownHead else { return try Head(transaction.record(forKey: layout.head), key: layout.head) }
        let record = try transaction.record(forKey: layout.head, known: known.record, afterCommit: known.afterCommit)
        return record == known.record ? known.head : try Head(record, key: layout.head)
    }
}
