import ContentStore
import Foundation
import Synchronization

/// The async/throwing API. It shares the callback API's per-key order: an operation is queued when
/// the call starts, behind every operation (callback or async) called before it on the same key.
/// Its store work runs on the store's own I/O threads, as `Store`'s async twins do, never on the
/// cooperative pool. Errors are `StoreError`s (an empty key is `invalidArgument`, an over-long one
/// `limitExceeded`).
///
/// Cancellation, as for `Store.write`: a task cancelled before its operation has started throws
/// `CancellationError` at once and nothing changes; a change whose commit has started completes,
/// and its caller learns the outcome. A cancelled `versions(forKey:)` stream ends.
extension DataArchive {
    /// Replaces the key's current value with `data`, leaving its archives as they are. Durable when
    /// it returns.
    public func set(_ data: Data, forKey key: String) async throws {
        try await engine.mutate(key, .set(.data(data), archiving: false))
    }

    /// Moves the key's current value into the archive as its newest version and sets `data`, in one
    /// commit; on a key without a value it just sets `data`.
    public func archiveCurrent(andSet data: Data, forKey key: String) async throws {
        try await engine.mutate(key, .set(.data(data), archiving: true))
    }

    /// The key's current value; nil when the key has no value.
    public func data(forKey key: String) async throws -> Data? {
        try await engine.run(on: .key(key), fromMemory: { [engine] in try engine.currentFromMemory(forKey: key) }) { [engine] _ in
            try engine.current(forKey: key)
        }
    }

    /// Every version from one snapshot: the current value, then the archives newest → oldest; empty
    /// when the key has no value.
    public func allVersions(forKey key: String) async throws -> [Data] {
        try await engine.run(on: .key(key)) { [engine] _ in
            guard let read = engine.allVersions(forKey: key) else { return [] }
            if let error = read.error { throw error }
            return read.versions
        }
    }

    /// The key's versions — current value, then archives newest → oldest — read lazily, one per
    /// iteration, from one snapshot taken once every operation on the key called before this one has
    /// run. Later writes do not change what it yields, and its versions stay readable (uncollected)
    /// until the stream ends or is dropped. Empty when the key has no value.
    ///
    /// Cancelling the consuming task ends the stream: the next iteration returns nil, and the
    /// snapshot is released.
    public func versions(forKey key: String) -> AsyncThrowingStream<Data, any Error> {
        let cursor = VersionCursor(engine: engine)
        engine.operations.submit(.key(key), .closure { [engine] in
            cursor.open(Result { try engine.snapshot(forKey: key) })
        })
        return AsyncThrowingStream(unfolding: { try await cursor.next() })
    }

    /// Keeps the current value and the `limit` newest archives. Throws `invalidArgument` (changing
    /// nothing) when `limit` is below 1.
    public func keep(upTo limit: Int, archivesForKey key: String) async throws {
        guard limit > 0 else {
            throw StoreError(code: .invalidArgument, message: "keep(upTo:) needs a limit of at least 1, not \(limit)")
        }
        try await engine.mutate(key, .keep(upTo: limit))
    }

    /// Removes the key with its current value and every archive. Deleting a missing key is no error.
    public func delete(key: String) async throws {
        try await engine.mutate(key, .delete)
    }
}

/// The state behind one `versions(forKey:)` stream: waits for its snapshot, then hands out one
/// version per call, reading it on the store's threads so the cooperative pool never blocks on I/O.
final class VersionCursor: Sendable {
    private enum Phase {
        case opening(waiters: [CheckedContinuation<Void, Never>])
        case reading(Snapshot, [Digest], next: Int)
        case failed(any Error)
        case done
    }

    private let engine: ArchiveEngine
    private let lane = Lane.newReader()
    private let phase = Mutex<Phase>(.opening(waiters: []))

    init(engine: ArchiveEngine) {
        self.engine = engine
    }

    /// Called once, on the key's lane, with the snapshot (nil: the key has no value).
    func open(_ result: Result<(Snapshot, VersionList)?, any Error>) {
        let waiters = phase.withLock { phase -> [CheckedContinuation<Void, Never>] in
            guard case .opening(let waiters) = phase else { return [] }
            switch result {
            case .success(let (snapshot, list)?): phase = .reading(snapshot, list.versions, next: 0)
            case .success(nil): phase = .done
            case .failure(let error): phase = .failed(error)
            }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func waitUntilOpen() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = phase.withLock { phase -> Bool in
                guard case .opening(var waiters) = phase else { return true }
                waiters.append(continuation)
                phase = .opening(waiters: waiters)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// The next version, nil at the end or once the task is cancelled.
    func next() async throws -> Data? {
        await waitUntilOpen()
        if Task.isCancelled {
            finish()
            return nil
        }
        let step = try phase.withLock { phase -> (Snapshot, Digest)? in
            switch phase {
            case .opening, .done:
                return nil
            case .failed(let error):
                phase = .done
                throw error
            case .reading(let snapshot, let versions, let next):
                // After the last version nothing more needs the snapshot's pin.
                phase = next + 1 < versions.count ? .reading(snapshot, versions, next: next + 1) : .done
                return (snapshot, versions[next])
            }
        }
        guard let (snapshot, digest) = step else { return nil }
        do {
            return try await engine.run(on: lane) { _ in try snapshot.get(digest) }
        } catch is CancellationError {
            finish()
            return nil
        }
    }

    /// Ends the stream and releases the snapshot.
    func finish() {
        phase.withLock { phase in
            if case .opening = phase { return }
            phase = .done
        }
    }
}
