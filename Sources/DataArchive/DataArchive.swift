import ContentStore
import Foundation

/// Versioned documents by key, stored in a ContentStore: mzaks' DataArchive, call for call, with
/// an async API beside it.
///
/// A key's current value and its archived versions are one record whose references are the
/// version blobs, so every change is one atomic, durable commit, and identical versions (also
/// under different keys) are stored once. See Docs/dataarchive.md.
///
/// **Ordering.** Per key, operations — callback and async alike — run in the order they were
/// called; different keys run in parallel on a bounded set of threads. Completion handlers never
/// run on the caller's stack: they run on a background thread, one at a time per key, in call
/// order. Nothing depends on a main run loop. Instances created for the same root directory (or
/// the same `Store`) in one process share one store and one ordering.
public final class DataArchive: Sendable {
    /// The longest key, in UTF-8 bytes (NUL and U+0001 count twice). Longer keys, and empty keys,
    /// fail with ``DataArchiveResult/storeFailure(_:)`` (`limitExceeded` / `invalidArgument`) and
    /// change nothing.
    public static let maximumKeyLength = 8000

    /// The shared archive in `$XDG_DATA_HOME/data_archive` (`~/.local/share/data_archive` when
    /// `XDG_DATA_HOME` is unset, empty or relative). Never crashes: if the store cannot be opened,
    /// each call reports the error as ``DataArchiveResult/storeFailure(_:)`` and the next call tries again.
    public static let `default` = DataArchive()

    let engine: ArchiveEngine

    /// An archive whose store is `<rootUrl>/data_archive` (default: the `default` archive's root),
    /// created if missing. Never throws: if the store cannot be opened, each call reports the
    /// error as ``DataArchiveResult/storeFailure(_:)`` and tries to open it again.
    public init(rootUrl: URL? = nil) {
        let root = rootUrl ?? DataArchive.defaultRootURL()
        engine = ArchiveEngine.shared(forDirectory: root.appendingPathComponent("data_archive", isDirectory: true))
        _ = try? engine.store()
    }

    /// An archive over `store`, whose other records it leaves alone (its records' keys start with
    /// `dataarchive/`). The archive does not close the store.
    public init(store: Store) {
        engine = ArchiveEngine.shared(for: store)
    }

    /// `$XDG_DATA_HOME` when it is an absolute path, else `$HOME/.local/share`.
    static func defaultRootURL(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data, isDirectory: true)
        }
        let home: String
        if let variable = environment["HOME"], variable.hasPrefix("/") {
            home = variable
        } else {
            home = FileManager.default.homeDirectoryForCurrentUser.path
        }
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/share", isDirectory: true)
    }

    /// The store directory, `<root>/data_archive`.
    var directory: URL { engine.directory }

    // MARK: - Writing

    /// Replaces the key's current value with `data`, leaving its archives as they are.
    public func set(key: String, data: Data, completionHandler: DataArchiveCompletionHandler? = nil) {
        engine.mutate(key, .set(.data(data), archiving: false), completionHandler: completionHandler)
    }

    /// Replaces the key's current value with `value.toData`, leaving its archives as they are.
    /// `toData` runs on the key's lane; if it returns nil the result is
    /// ``DataArchiveResult/couldNotConvertFile(_:_:)`` and nothing changes.
    public func set<T: ValueConverter>(key: String, value: T, completionHandler: DataArchiveCompletionHandler? = nil) {
        let payload = Mutation.Payload.converted(Handover(value: { value.toData }))
        engine.mutate(key, .set(payload, archiving: false), typeName: String(describing: T.self), completionHandler: completionHandler)
    }

    /// Moves the key's current value into the archive as its newest version and sets `data` as the
    /// current value, in one commit. On a key without a value it just sets `data` (success).
    public func archiveCurrent(key: String, andSetNewData data: Data, completionHandler: DataArchiveCompletionHandler? = nil) {
        engine.mutate(key, .set(.data(data), archiving: true), completionHandler: completionHandler)
    }

    /// Moves the key's current value into the archive as its newest version and sets
    /// `value.toData` as the current value, in one commit. If `toData` returns nil the result is
    /// ``DataArchiveResult/couldNotConvertFile(_:_:)`` and nothing changes.
    public func archiveCurrent<T: ValueConverter>(key: String, andSetNew value: T, completionHandler: DataArchiveCompletionHandler? = nil) {
        let payload = Mutation.Payload.converted(Handover(value: { value.toData }))
        engine.mutate(key, .set(payload, archiving: true), typeName: String(describing: T.self), completionHandler: completionHandler)
    }

    /// Keeps the current value and the `limit` newest archives, dropping older archives in one
    /// commit (their blobs become garbage once nothing else references them). A `limit` below 1
    /// is ``DataArchiveResult/limitNeedsToBePositiveNumber`` and changes nothing; a missing key is
    /// success and stays missing.
    public func keep(upTo limit: Int, archivesForKey key: String, completionHandler: DataArchiveCompletionHandler? = nil) {
        guard limit > 0 else {
            // Still through the key's lanes, so completions keep their order.
            engine.perform(on: .key(key), { _ in DataArchiveResult.limitNeedsToBePositiveNumber }, deliver: completionHandler)
            return
        }
        engine.mutate(key, .keep(upTo: limit), completionHandler: completionHandler)
    }

    /// Removes the key with its current value and every archive, in one commit. The key can be
    /// written again at once. Deleting a missing key is success.
    public func delete(key: String, completionHandler: DataArchiveCompletionHandler? = nil) {
        engine.mutate(key, .delete, completionHandler: completionHandler)
    }

    // MARK: - Reading

    /// The key's current value: `(data, .success)`, `(nil, .success)` when the key has no value, or
    /// `(nil, .storeFailure)`. Never creates the key.
    public func get(key: String, completionHandler: @escaping @Sendable (Data?, DataArchiveResult) -> Void) {
        engine.read(on: .key(key), CurrentValueRead(key: key, completionHandler: completionHandler))
    }

    /// The key's current value converted by `T`: `(value, .success)`; `(nil, .fileNotFound)` when
    /// the key has no value; `(nil, .couldNotConvertFile)` when `T.from(data:)` returns nil; or
    /// `(nil, .storeFailure)`. Never creates the key.
    public func get<T: ValueConverter>(key: String, converterType: T.Type, completionHandler: @escaping @Sendable (T.T?, DataArchiveResult) -> Void) {
        engine.read(on: .key(key), ConvertedValueRead<T>(key: key, engine: engine, decode: Handover<T>.decoder, completionHandler: completionHandler))
    }

    /// Every version from one consistent snapshot: the current value, then the archives newest →
    /// oldest. A key without a value gives `([], .fileNotFound)`; a failed read gives the versions
    /// before it and `.storeFailure`. Never creates the key.
    public func getAll(key: String, completionHandler: @escaping @Sendable ([Data], DataArchiveResult) -> Void) {
        let engine = engine
        engine.read(on: .key(key), { engine in
            engine.allVersions(forKey: key)
        }, deliver: { read in
            guard let read else {
                completionHandler([], .fileNotFound(engine.fileURL(forKey: key, index: 0)))
                return
            }
            completionHandler(read.versions, read.error.map { .storeFailure($0) } ?? .success)
        })
    }

    /// Every version converted by `T`, from one consistent snapshot: the current value, then the
    /// archives newest → oldest. A key without a value gives `([], .fileNotFound)`; a version that
    /// does not convert stops the list there with `.couldNotConvertFile` naming it; a failed read
    /// stops it with `.storeFailure`. Never creates the key.
    public func getAll<T: ValueConverter>(key: String, converterType: T.Type, completionHandler: @escaping @Sendable ([T.T], DataArchiveResult) -> Void) {
        let engine = engine
        let typeName = String(describing: T.self)
        let decode = Handover<T>.decoder
        engine.read(on: .key(key), { engine in
            engine.allVersions(forKey: key)
        }, deliver: { read in
            guard let read else {
                completionHandler([], .fileNotFound(engine.fileURL(forKey: key, index: 0)))
                return
            }
            var values: [T.T] = []
            values.reserveCapacity(read.versions.count)
            for (position, data) in read.versions.enumerated() {
                guard let value = decode.value(data) else {
                    let index = ArchiveEngine.fileIndex(ofPosition: position, total: read.total)
                    completionHandler(values, .couldNotConvertFile(engine.fileURL(forKey: key, index: index), typeName))
                    return
                }
                values.append(value)
            }
            completionHandler(values, read.error.map { .storeFailure($0) } ?? .success)
        })
    }

    /// A reader over the key's versions as they are once every operation called before this one
    /// has run: it reads one snapshot, so later writes neither wait for it nor change what it
    /// yields, and the versions it has yet to read stay readable (garbage collection spares them)
    /// until it finishes. Passes nil when the key has no value (or cannot be read).
    public func lazyLockingReader(key: String, completionHandler: @escaping @Sendable (DataArchiveLazyLockingReader?) -> Void) {
        engine.perform(on: .key(key), { engine -> DataArchiveLazyLockingReader? in
            guard let (snapshot, list) = (try? engine.snapshot(forKey: key)) ?? nil else { return nil }
            return DataArchiveLazyLockingReader(engine: engine, key: key, snapshot: snapshot, versions: list.versions)
        }, deliver: completionHandler)
    }

    /// Every key that has a value, ascending, once every operation called before this property was
    /// read has run (so a `set` followed by `keys` lists the key). Empty when the store cannot be
    /// opened. Blocks the caller while earlier operations finish; called from inside a
    /// `ValueConverter` it does not wait.
    public var keys: [String] {
        engine.operations.waitUntilFinished(through: engine.operations.lastTicket)
        return (try? engine.keys()) ?? []
    }

    /// How many archived versions the key has (the current value not counted; 0 for a missing key
    /// or an unreadable store), once every operation on the key called before this one has run.
    /// Blocks the caller meanwhile; called from inside a `ValueConverter` it does not wait.
    public func numberOfArchives(key: String) -> Int {
        engine.runAndWait(on: .key(key)) { engine in
            (try? engine.numberOfArchives(forKey: key)) ?? 0
        }
    }
}
