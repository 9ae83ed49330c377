import Synchronization

/// The engine's state: records, blob index and commit sequence (``StoreState``), and whether the
/// store is open.
///
/// Owns: the state changes only under this lock, and only through ``StoreState``'s methods: `apply`
/// and `drop`, the same ones WAL replay runs, so a recovered store holds exactly what the live
/// process had, and `freshen`, the one change that is not logged. Every logged change is appended
/// to the log under the same hold of the lock, so the log's order is the order the changes were
/// applied in, and a batch taken under the lock ends at a state the core has (``CommitPipeline``).
///
/// Lock order (Docs/architecture.md): the pipeline's writer lock → the core lock → the published
/// records' lock, the log's lock, the packs' lock, the snapshot registry's lock (leaves). The core
/// lock is held briefly, never across I/O except a checkpoint's cut of the log.
final class Core: Sendable {
    /// What the lock guards.
    struct Held {
        var state: StoreState
        var isOpen = true
    }

    private let lock: Mutex<Held>

    init(_ state: StoreState) {
        lock = Mutex(Held(state: state))
    }

    /// Runs `body` with the core lock held.
    func withLock<Result, E: Error>(_ body: (inout Held) throws(E) -> sending Result) throws(E) -> sending Result {
        try lock.withLock(body)
    }

    /// Runs `body` with the core lock held, once the store is known to be open: `closed` otherwise.
    func whileOpen<Result>(_ body: (inout Held) throws -> sending Result) throws -> sending Result {
        try lock.withLock { (held: inout Held) throws -> sending Result in
            guard held.isOpen else { throw Store.closedError }
            return try body(&held)
        }
    }
}
