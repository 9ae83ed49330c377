@_exported import ContentStore
import Foundation

/// A typed application state (settings, credentials, remote configuration) kept in a
/// ``ContentStore/Store`` under a name, read from any thread without waiting and changed through
/// lenses that each know only their own part (after POSLens).
///
/// ```swift
/// struct Settings: Codable, Sendable, Equatable { var theme = "light"; var protection: Protection? }
/// let settings = try LensStore(store: store, name: "settings", default: Settings())
/// let theme = settings.root.theme                  // MutableLens<String>
/// try theme.set("dark")                             // one durable commit
/// for await value in theme.values() { ... }         // "dark", then every later change
/// ```
///
/// - Every update is one atomic, durable commit of the whole root; updates run one at a time and
///   each sees the one before; an update that leaves the root equal commits nothing.
/// - ``value`` (and every lens's `value`) reads the latest committed root without waiting for a
///   writer: a pointer swapped only after a commit is durable.
/// - Two `LensStore`s opened on the same store object and name share one state and both notify.
/// - The root is stored as its canonical JSON (keys sorted), split into blobs so that a change to
///   one field of a large state stores only the parts around it; older versions are kept as
///   ``Configuration/keptVersions`` says, the rest collected by the store's garbage collection.
///   Docs/statelens.md has the mapping onto records and blobs.
public final class LensStore<Root: Codable & Sendable & Equatable>: Sendable {
    /// The store the state lives in.
    public let store: Store
    /// The state's name in the store.
    public let name: String
    /// What the state reads as while nothing is stored (never written, or after ``reset()``).
    public let defaultValue: Root
    /// How this instance keeps versions and migrates old roots.
    public let configuration: Configuration

    @usableFromInline
    let core: LensCore<Root>

    /// How a ``LensStore`` keeps versions and reads roots stored by older code.
    public struct Configuration: Sendable {
        /// How many versions before the current one are kept, restorable with
        /// ``LensStore/restore(_:)``; older ones are dropped by the next update and their blobs
        /// collected. Default 0.
        public var keptVersions: Int = 0
        /// Turns a stored root that no longer decodes as `Root` (given as its canonical JSON) into
        /// a `Root`, at `init` and whenever an old version is read. nil (the default): such a root
        /// is ``LensError/undecodable(_:)``. The migrated root is stored by the next update, not before.
        public var migrate: (@Sendable (Data) throws -> Root)?

        /// The defaults: no kept versions, no migration.
        public init() {}
    }

    /// Opens the state `name` in `store`, reading what is stored (nothing is written).
    ///
    /// - Throws: ``LensError/invalidName(_:)`` for a name that is empty, longer than 256 UTF-8
    ///   bytes or contains NUL; ``LensError/undecodable(_:)`` when the stored root decodes neither
    ///   as `Root` nor through ``Configuration/migrate``; `StoreError` from the store (closed,
    ///   damaged, a record written by a newer format).
    public init(store: Store, name: String, default defaultValue: Root, configuration: Configuration = .init()) throws {
        let keys = try StateKeys(name: name)
        self.store = store
        self.name = name
        self.defaultValue = defaultValue
        self.configuration = configuration
        let decode = LensStore.decoder(configuration.migrate)
        core = try SharedObjects.object(for: LensCore<Root>.key(store: store, name: name)) {
            LensCore(store: store, name: name, keys: keys, initial: try LensCore<Root>.load(store: store, keys: keys, decode: decode))
        }
    }

    /// The lens of the whole state.
    public var root: MutableLens<Root> {
        MutableLens(access: rootAccess)
    }

    /// The latest committed root (``defaultValue`` while nothing is stored). Never waits for a writer.
    ///
    /// One lock, held by writers only to swap a pointer, and one copy of the root (Docs/statelens.md
    /// has the measurements).
    @inlinable
    public var value: Root {
        core.latestRoot() ?? defaultValue
    }

    // MARK: Versions

    /// The current version and the kept older ones, newest first; empty while the state has never
    /// been written.
    ///
    /// - Throws: `StoreError` from the store.
    public func versions() throws -> [LensVersion] {
        let keys = core.keys
        let kept = configuration.keptVersions
        return try store.read { snapshot in
            guard let head = try snapshot.record(forKey: keys.head) else { return [] }
            var versions = [LensVersion(try VersionRecord(head, key: keys.head))]
            for key in try snapshot.keys(withPrefix: keys.versionPrefix).suffix(max(0, kept)).reversed() {
                guard let record = try snapshot.record(forKey: key) else { continue }
                versions.append(LensVersion(try VersionRecord(record, key: key)))
            }
            return versions
        }
    }

    /// Makes `version`'s value the current one again: an ordinary update (a new version, durable,
    /// notifying like any other), none if the value is already current. Restoring a version made
    /// by ``reset()`` resets.
    ///
    /// - Throws: `StoreError` with code `notFound` when the state keeps no version with that
    ///   sequence; ``LensError/undecodable(_:)`` when its root cannot be read; `StoreError` from
    ///   the store.
    public func restore(_ version: LensVersion) throws {
        let keys = core.keys
        let json: Data? = try store.read { snapshot in
            for key in [keys.head, keys.version(version.sequence)] {
                guard let record = try snapshot.record(forKey: key) else { continue }
                let stored = try VersionRecord(record, key: key)
                if stored.sequence == version.sequence { return try stored.json(in: snapshot) }
            }
            throw StoreError(code: .notFound, message: "state \"\(name)\" keeps no version \(version.sequence)")
        }
        let decode = LensStore.decoder(configuration.migrate)
        let restored = try json.map { try decode($0).root }
        try commit { _ in (restored, ()) }
    }

    /// Removes the stored value in one durable commit: ``value`` is the default again, and lenses
    /// whose value changes are notified as for an update. Kept versions stay restorable. Nothing is
    /// committed when no value is stored.
    ///
    /// - Throws: `StoreError` from the store.
    public func reset() throws {
        try commit { _ in (nil, ()) }
    }

    // MARK: Internals

    /// The root lens's access: every lens is derived from it.
    var rootAccess: Access<Root> {
        let core = self.core
        let defaultValue = self.defaultValue
        return Access<Root>(
            store: store,
            path: .root,
            read: { core.latestRoot() ?? defaultValue },
            modify: { [self] body in
                try commit { current in
                    var root = current ?? defaultValue
                    try body(&root)
                    // The core compares `root` with `current` (no commit when equal); only a default
                    // left as it was is compared here, so that it is not stored on its own.
                    guard current == nil, root == defaultValue else { return (root, ()) }
                    return (nil, ())
                }
            },
            observe: { initial, finish, deliver in
                let token = core.addObserver(initial: { initial($0 ?? defaultValue) }, finish: finish) { old, new, sequence in
                    deliver(old ?? defaultValue, new ?? defaultValue, sequence)
                }
                return { [weak core] in core?.removeObserver(token) }
            })
    }

    /// One update through the core, with this instance's versions and migration.
    func commit<T>(_ change: (Root?) throws -> (new: Root?, result: T)) throws -> T {
        let decode = LensStore.decoder(configuration.migrate)
        return try core.commit(keptVersions: configuration.keptVersions, decode: { try decode($0).root }, change)
    }

    /// Decodes a stored root's JSON as `Root`, else through `migrate`.
    static func decoder(_ migrate: (@Sendable (Data) throws -> Root)?) -> @Sendable (Data) throws -> (root: Root, migrated: Bool) {
        { json in
            do {
                return (try JSONDecoder().decode(Root.self, from: json), false)
            } catch let decodingError {
                guard let migrate else { throw LensError.undecodable(decodingError) }
                do {
                    return (try migrate(json), true)
                } catch {
                    throw LensError.undecodable(error)
                }
            }
        }
    }
}

extension LensVersion {
    init(_ stored: VersionRecord) {
        self.init(sequence: stored.sequence, date: stored.date)
    }
}

extension LensStore {
    /// ``versions()`` for async code, on the store's I/O threads.
    public func versions() async throws -> [LensVersion] {
        try await store.runBlocking { try self.versions() }
    }

    /// ``restore(_:)`` for async code, on the store's I/O threads.
    public func restore(_ version: LensVersion) async throws {
        try await store.runBlocking { try self.restore(version) }
    }

    /// ``reset()`` for async code, on the store's I/O threads.
    public func reset() async throws {
        try await store.runBlocking { try self.reset() }
    }
}
