import ContentStore
import Foundation
import Synchronization

/// The store work behind each operation. Each runs on its key's lane of `operations`, so the
/// read-modify-write inside one `store.write` never races another operation of this process on
/// the same key; the transaction also makes it correct against writers outside the lanes.
extension ArchiveEngine {
    /// Stores `data` as the key's current value; with `archiving`, the old current value becomes the
    /// newest archive, otherwise it is replaced. One blob put, one commit.
    func setCurrent(_ data: Data, forKey key: String, archiving: Bool) throws {
        let recordKey = try KeyCoding.recordKey(for: key)
        let store = try store()
        let digest = try store.put(data)
        try store.write { transaction in
            let existing = try transaction.record(forKey: recordKey).map { try VersionList(record: $0, key: key) }
            let list: VersionList
            if let existing {
                if !archiving && existing.current == digest { return }   // unchanged: nothing to commit
                list = VersionList(versions: [digest] + existing.versions.dropFirst(archiving ? 0 : 1))
            } else {
                list = VersionList(versions: [digest])
            }
            try transaction.setRecord(list.record, forKey: recordKey)
        }
    }

    /// Drops all but the `limit` newest archives (the current value always stays). One commit, or
    /// none when there is nothing to drop.
    func keep(upTo limit: Int, archivesForKey key: String) throws {
        let recordKey = try KeyCoding.recordKey(for: key)
        try store().write { transaction in
            guard let record = try transaction.record(forKey: recordKey) else { return }
            var list = try VersionList(record: record, key: key)
            guard list.archiveCount > limit else { return }
            list.versions.removeLast(list.archiveCount - limit)
            try transaction.setRecord(list.record, forKey: recordKey)
        }
    }

    /// Removes the key and all its versions. Removing a missing key changes nothing.
    func delete(key: String) throws {
        let recordKey = try KeyCoding.recordKey(for: key)
        try store().write { transaction in
            try transaction.removeRecord(forKey: recordKey)
        }
    }

    /// A snapshot and the key's versions in it, or nil when the key has no value. The snapshot keeps
    /// the versions readable (and uncollected) for as long as it lives.
    func snapshot(forKey key: String) throws -> (Snapshot, VersionList)? {
        let recordKey = try KeyCoding.recordKey(for: key)
        let snapshot = try store().makeSnapshot()
        guard let record = try snapshot.record(forKey: recordKey) else { return nil }
        return (snapshot, try VersionList(record: record, key: key))
    }

    /// The key's current value, or nil.
    func current(forKey key: String) throws -> Data? {
        guard let (snapshot, list) = try snapshot(forKey: key) else { return nil }
        return try snapshot.get(list.current)
    }

    /// Every version, current first, read from one snapshot; nil when the key has no value. On a
    /// failed read: the versions read before it, and the error.
    func allVersions(forKey key: String) -> VersionsRead? {
        let found: (Snapshot, VersionList)?
        do {
            found = try snapshot(forKey: key)
        } catch {
            return VersionsRead(versions: [], total: 0, error: error)
        }
        guard let (snapshot, list) = found else { return nil }
        var read = VersionsRead(versions: [], total: list.versions.count, error: nil)
        read.versions.reserveCapacity(list.versions.count)
        for digest in list.versions {
            do {
                read.versions.append(try snapshot.get(digest))
            } catch {
                read.error = error
                break
            }
        }
        return read
    }

    /// The number of archived versions (0 for a missing key).
    func numberOfArchives(forKey key: String) throws -> Int {
        let recordKey = try KeyCoding.recordKey(for: key)
        guard let record = try store().record(forKey: recordKey) else { return 0 }
        return try VersionList(record: record, key: key).archiveCount
    }

    /// Every key with a value, ascending.
    func keys() throws -> [String] {
        try store().keys(withPrefix: KeyCoding.prefix).compactMap(KeyCoding.key(forRecordKey:)).sorted()
    }

    /// `<directory>/<key>/<index>.dat`, the file the original library would have used (messages only).
    func fileURL(forKey key: String, index: Int) -> URL {
        directory.appendingPathComponent(key, isDirectory: true).appendingPathComponent("\(index).dat", isDirectory: false)
    }

    /// The original's file number of the version at `position` (0 = current, then archives newest →
    /// oldest) among `total` versions: 0 for the current value, archives numbered 1 (oldest) … newest.
    static func fileIndex(ofPosition position: Int, total: Int) -> Int {
        position == 0 ? 0 : total - position
    }

    /// `<directory>/<key>/`.
    func folderURL(forKey key: String) -> URL {
        directory.appendingPathComponent(key, isDirectory: true)
    }
}

extension ArchiveEngine {
    /// Runs `operation` on `lane` after everything called before it there, then hands its result
    /// to `deliver` on the same lane of `completions` (never on the caller's stack).
    func perform<R: Sendable>(
        on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) -> R, deliver: (@Sendable (R) -> Void)?
    ) {
        operations.submit(lane) {
            let result = operation(self)
            if let deliver {
                self.completions.submit(lane) { deliver(result) }
            }
        }
    }

    /// Runs `operation` on `lane` after everything called before it there, and returns its result.
    func run<R: Sendable>(on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            operations.submit(lane) {
                continuation.resume(with: Result { try operation(self) })
            }
        }
    }

    /// Runs `operation` on `lane` after everything called before it there, blocking the caller until
    /// it has run. On a worker thread (from a `ValueConverter` inside an operation) it runs at once,
    /// since waiting there could wait for the caller itself.
    func runAndWait<R: Sendable>(on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) -> R) -> R {
        if operations.isCurrentThreadWorker { return operation(self) }
        let box = ResultBox<R>()
        let semaphore = DispatchSemaphore(value: 0)
        operations.submit(lane) {
            box.set(operation(self))
            semaphore.signal()
        }
        semaphore.wait()
        return box.take()
    }
}

/// Versions read for `getAll` / `allVersions`.
struct VersionsRead: Sendable {
    /// The versions read, current first.
    var versions: [Data]
    /// How many versions the key has.
    var total: Int
    /// Why reading stopped early, if it did.
    var error: (any Error)?
}

/// Carries one value from a worker to a waiting thread.
final class ResultBox<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
    func take() -> Value { value.withLock { $0.take()! } }
}

/// A value handed to a worker thread, as the original library handed `ValueConverter`s to its
/// per-key queues.
///
/// The `ValueConverter` API predates `Sendable`: its signatures take any converter. Conversions run
/// off the caller's thread, so a converter's `toData` and `from(data:)` must be callable from any
/// thread, and a value passed to `set`/`archiveCurrent` must not be mutated (if it is a reference
/// type) until that operation's completion handler has run. Docs/dataarchive.md says so.
struct Handover<Value>: @unchecked Sendable {
    let value: Value
}

extension Handover where Value: ValueConverter {
    /// `Value.from(data:)` unwrapped, for use on a worker thread.
    static var decoder: Handover<(Data) -> Value.T?> {
        Handover<(Data) -> Value.T?>(value: { Value.from(data: $0)?.value })
    }
}
