import ContentStore
import Dispatch
import Foundation
import Synchronization

/// A lane of the executors: one per key, plus one per lazy reader or `versions` stream.
enum Lane: Hashable, Sendable {
    case key(String)
    case reader(UInt64)

    private static let nextReader = Atomic<UInt64>(0)

    /// A lane no other reader uses.
    static func newReader() -> Lane {
        .reader(nextReader.add(1, ordering: .relaxed).newValue)
    }
}

/// What every ``DataArchive`` instance over one store shares: the store (opened here when
/// the archive was created from a directory), and the two executors that give per-key ordering.
///
/// Operations run on `operations`: store work only (plus a `ValueConverter`'s `toData`), never a
/// completion handler, so an operation never waits for user code. When one finishes, its
/// completion handler is queued on `completions` in the same lane, so completions of one key run
/// one at a time in call order, and a slow completion holds up only later completions of its key,
/// not store work.
final class ArchiveEngine: Sendable {
    /// The store's directory, `<root>/data_archive`; results' URLs are built from it.
    let directory: URL
    let operations: LaneExecutor<Lane, OperationJob>
    let completions: LaneExecutor<Lane, ClosureJob>

    private enum Source {
        /// Given by the caller; never closed here.
        case given(Store)
        /// Opened here (by `DataArchive.init`, then by each use until it opens), shared with every
        /// other facade in the process over the same directory (``SharedStores``); released with the engine.
        case owned(SharedStores.Lease?)
    }

    private let source: Mutex<Source>
    /// The store when it was given: it never changes, so reads take it without the lock.
    private let given: Store?
    /// `given` without a reference count, for ``withStore(_:)``.
    private let unretainedGiven: Unmanaged<Store>?
    /// The engine's key in `SharedObjects`; nil for an engine that is not shared.
    private let registryKey: SharedObjects.Key?

    private init(directory: URL, source: Source, registryKey: SharedObjects.Key?) {
        self.directory = directory
        self.source = Mutex(source)
        if case .given(let store) = source { given = store } else { given = nil }
        unretainedGiven = given.map { Unmanaged.passUnretained($0) }
        self.registryKey = registryKey
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let durability: Store.Durability
        switch source {
        case .given(let store): durability = store.configuration.durability
        case .owned(let lease): durability = lease?.store.configuration.durability ?? Store.Configuration().durability
        }
        // With fsync, an operation mostly waits for its commit; more commits in flight share each
        // group commit. Without it, operations are CPU work and more threads than cores only contend.
        let width = durability == .full ? 16 : max(2, cores)
        operations = LaneExecutor(label: "DataArchive.operations", width: width)
        // Completion handlers are user code; workers start on demand, so short handlers use few.
        completions = LaneExecutor(label: "DataArchive.completions", width: max(8, 2 * cores), waitable: false)
    }

    deinit {
        // The lease goes with the source: the store closes when no other facade uses it.
        if let registryKey { SharedObjects.release(registryKey) }
    }

    /// The store, opening it when this engine owns it and it is not open yet.
    func store() throws -> Store {
        if let given { return given }
        return try source.withLock { source in
            switch source {
            case .given(let store):
                return store
            case .owned(let lease?):
                return lease.store
            case .owned(nil):
                try FileManager.default.createDirectory(at: directory.deletingLastPathComponent(), withIntermediateDirectories: true)
                let lease = try SharedStores.acquire(directory: directory)
                source = .owned(lease)
                return lease.store
            }
        }
    }

    /// Runs `body` with the store, opening it as ``store()`` does. A given store is lent without a
    /// retain and release: a store has a weak reference (its control socket's acceptor holds one),
    /// so its counts live in a side table, and each count change costs an indirection and an atomic
    /// on a line every reading thread writes. `given` keeps it alive for as long as this engine.
    func withStore<T>(_ body: (Store) throws -> T) throws -> T {
        if let unretainedGiven { return try unretainedGiven._withUnsafeGuaranteedRef(body) }
        return try body(store())
    }

    /// The store if it is open (or was given), without opening it.
    var openStore: Store? {
        source.withLock { source in
            switch source {
            case .given(let store): store
            case .owned(let lease): lease?.store
            }
        }
    }

    private func isUsing(_ store: Store) -> Bool {
        source.withLock { source in
            switch source {
            case .given(let given): return given === store
            case .owned(let lease): return lease?.store === store
            }
        }
    }

    /// The engine for the store directory `directory`, shared by every archive created for it in
    /// this process (so two instances for one root share one store and one ordering).
    static func shared(forDirectory directory: URL) -> ArchiveEngine {
        let key = registryKey(directory)
        return SharedObjects.object(for: key) {
            ArchiveEngine(directory: directory.standardizedFileURL, source: .owned(nil), registryKey: key)
        }
    }

    /// The engine for `store`, shared by every archive created for the same store object.
    static func shared(for store: Store) -> ArchiveEngine {
        let key = registryKey(store.directory)
        let engine = SharedObjects.object(for: key, accept: { $0.isUsing(store) }) {
            ArchiveEngine(directory: store.directory, source: .given(store), registryKey: key)
        }
        // Another store object for the same directory (one that was closed, say): not shared.
        return engine ?? ArchiveEngine(directory: store.directory, source: .given(store), registryKey: nil)
    }

    /// Engines are shared by store directory. An engine going away may still hold its store's lock
    /// while it closes it; `SharedObjects` makes a new engine for the directory wait for that.
    private static func registryKey(_ directory: URL) -> SharedObjects.Key {
        SharedObjects.Key(ArchiveEngine.self, name: directory.standardizedFileURL.path)
    }
}
