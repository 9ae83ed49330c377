import ContentStore
import Foundation
import Synchronization

/// The store work behind the reads. (Writes are ``Mutation``s.) Each runs on its key's lane of
/// `operations`, after every operation called before it on that key.
extension ArchiveEngine {
    /// A snapshot and the key's versions in it, or nil when the key has no value. The snapshot keeps
    /// the versions readable (and uncollected) for as long as it lives.
    func snapshot(forKey key: String) throws -> (Snapshot, VersionList)? {
        let recordKey = try KeyCoding.recordKey(for: key)
        let snapshot = try store().makeSnapshot()
        guard let record = try snapshot.record(forKey: recordKey) else { return nil }
        return (snapshot, try VersionList(record: record, key: key))
    }

    /// The key's current value, or nil. A short read: no snapshot pin (``Store/readLatest(_:)``).
    func current(forKey key: String) throws -> Data? {
        let recordKey = try KeyCoding.recordKey(for: key)
        return try withStore { store in
            try store.readLatest { view in
                guard let record = try view.record(forKey: recordKey) else { return nil }
                return try view.get(try VersionList(record: record, key: key).current)
            }
        }
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
        guard let record = try withStore({ try $0.record(forKey: recordKey) }) else { return 0 }
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
}

extension ArchiveEngine {
    /// Runs `operation` on `lane` after everything called before it there, then hands its result
    /// to `deliver` on the same lane of `completions` (never on the caller's stack).
    func perform<R: Sendable>(
        on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) -> R, deliver: (@Sendable (R) -> Void)?
    ) {
        operations.submit(lane, .closure {
            let result = operation(self)
            if let deliver {
                self.completions.submit(lane) { deliver(result) }
            }
        })
    }

    /// Runs `read` on `lane` after everything called before it there, then hands its result to
    /// `read`'s delivery on the same lane of `completions` (never on the caller's stack). When nothing
    /// is queued or running on the lane, the read runs at once on the calling thread, and the
    /// completion goes to the hand-off thread when it is free (``readPromptly(on:_:)``).
    func read<Read: CallbackRead>(on lane: Lane, _ read: Read) {
        guard let claim = operations.claimIfIdle(lane) else {
            return perform(on: lane, { read.read($0) }, deliver: { read.delivery(of: $0).runCopy() })
        }
        // The completion is handed on before the lane is released, so it precedes those of later calls.
        let handed = readPromptly(on: lane, read)
        operations.release(claim)
        // Waited for after the lane is released: the operations called meanwhile need not wait too.
        // (Called through the optional, not bound by `if let`: a binding copies the completion.)
        handed?.waitBriefly(releasingIn: completions)
    }

    /// Runs `operation` on `lane` as ``read(on:_:)`` does, handing its result to `deliver`.
    func read<R: Sendable>(
        on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) -> R, deliver: @escaping @Sendable (R) -> Void
    ) {
        read(on: lane, ClosureRead(body: operation, handler: deliver))
    }

    /// Reads on the calling thread, which holds `lane`, and hands the result to `read`'s delivery as
    /// the next completion of `lane`: on the hand-off thread when the lane has no completion queued
    /// or running and the thread is free (returned, for the caller to wait for briefly), else queued
    /// on `completions`. Either way it runs after the lane's earlier completions and before its later
    /// ones, never on the caller's stack.
    private func readPromptly<Read: CallbackRead>(on lane: Lane, _ read: Read) -> HandedCompletion<Read.Delivery>? {
        guard let claim = completions.claimIfIdle(lane) else {
            let delivery = read.delivery(of: read.read(self))
            completions.submit(lane) { delivery.runCopy() }
            return nil
        }
        // A sleeping hand-off thread wakes while the read runs, not after it.
        CompletionHandoff.shared.wakeIfAsleep()
        let delivery = read.delivery(of: read.read(self))
        if let handed = CompletionHandoff.shared.handOff(delivery, claim: claim) { return handed }
        // Queued behind the claim, so it runs once the claim ends, before anything submitted later.
        completions.submit(lane) { delivery.runCopy() }
        completions.release(claim)
        return nil
    }

    /// Queues `change` on the key's lane; `finish` runs on the worker once it has committed or failed.
    func mutate(_ key: String, _ change: Mutation.Change, finish: @escaping @Sendable (Mutation.Outcome) -> Void) {
        operations.submit(.key(key), .mutation(Mutation(engine: self, key: key, change: change, finish: finish)))
    }

    /// Queues `change` on the key's lane and hands the result to `completionHandler` on the key's
    /// completion lane. `typeName` names the converter in a `couldNotConvertFile` result.
    func mutate(_ key: String, _ change: Mutation.Change, typeName: String = "Data", completionHandler: DataArchiveCompletionHandler?) {
        mutate(key, change) { outcome in
            guard let completionHandler else { return }
            let result: DataArchiveResult = switch outcome {
            case .success: .success
            case .failure(let error): .storeFailure(error)
            case .unconvertible: .couldNotConvertFile(self.fileURL(forKey: key, index: 0), typeName)
            }
            self.completions.submit(.key(key)) { completionHandler(result) }
        }
    }

    /// Runs `operation` on `lane` after everything called before it there, blocking the caller until
    /// it has run: on the calling thread when the lane is idle, else on a worker. On a worker thread
    /// (from a `ValueConverter` inside an operation) it runs at once, since waiting there could wait
    /// for the caller itself.
    func runAndWait<R: Sendable>(on lane: Lane, _ operation: @escaping @Sendable (ArchiveEngine) -> R) -> R {
        if operations.isCurrentThreadWorker { return operation(self) }
        if let result = operations.runIfIdle(lane, { operation(self) }) { return result }
        let box = ResultBox<R>()
        let semaphore = DispatchSemaphore(value: 0)
        operations.submit(lane, .closure {
            box.set(operation(self))
            semaphore.signal()
        })
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
