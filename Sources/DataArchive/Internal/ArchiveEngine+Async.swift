import ContentStore
import Dispatch
import Foundation
import Synchronization

/// The async API's store work.
///
/// Invariant owned here: an async call's store work runs on the store's own I/O threads (the
/// threads behind `Store`'s async twins), never on the cooperative pool or on the caller's stack,
/// and in its key's order. The call takes a turn on its lane when it is called, so it keeps its
/// place among callback calls; when the lane reaches the turn, the work is handed to the store's
/// threads, and the thread that ran it releases the lane before the caller resumes. No cooperative
/// thread is needed to move a lane on, so tasks blocked in the synchronous API cannot stall it.
extension ArchiveEngine {
    /// Runs `operation` on the store's I/O threads after every operation called before it on `lane`,
    /// and returns its result.
    ///
    /// A task cancelled before its turn has started gets `CancellationError` at once and the operation
    /// never runs (its turn passes when it comes). Once started, the operation sees the cancellation
    /// through ``AsyncCall/checkCancellation()``, which a mutation calls as its commit starts.
    ///
    /// `fromMemory`, when given, is tried first where the turn starts (on the calling thread when the
    /// lane is idle): it answers from memory only, under short locks, or returns nil when the answer
    /// needs I/O. A value read from the read cache so costs no thread hop at all.
    func run<R: Sendable>(
        on lane: Lane, fromMemory: (@Sendable () throws -> R?)? = nil, _ operation: @escaping @Sendable (AsyncCall<R>) throws -> R
    ) async throws -> R {
        let call = AsyncCall<R>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard call.install(continuation) else { return }
                operations.takeTurn(lane) { release in
                    guard call.begin() else { return release() }
                    if let fromMemory, let answer = Self.answer(fromMemory) {
                        release()
                        return call.finish(answer)
                    }
                    self.onStoreThreads { opened in
                        let result = Result {
                            _ = try opened.get()
                            try call.checkCancellation()
                            return try operation(call)
                        }
                        release()
                        call.finish(result)
                    }
                }
            }
        } onCancel: {
            call.cancel()
        }
    }

    /// Applies `change` to the key after everything called before it there, on the store's threads,
    /// and returns once it has committed; throws its error. A task cancelled before the commit starts
    /// gets `CancellationError` and nothing is committed.
    func mutate(_ key: String, _ change: Mutation.Change) async throws {
        try await run(on: .key(key)) { call in
            try Mutation.apply(alone: change, key: key, engine: self, beforeCommit: call.checkCancellation).get()
        }
    }

    /// The key's current value when it can be had without I/O — its record (always in memory) and
    /// the blob from the read cache —, `.some(nil)` for a key without a value; nil when the value
    /// needs a read from disk or the store is not open yet.
    func currentFromMemory(forKey key: String) throws -> Data?? {
        guard let store = openStore else { return nil }
        let recordKey = try KeyCoding.recordKey(for: key)
        guard let record = try store.record(forKey: recordKey) else { return .some(nil) }
        guard let data = try store.engine.cachedBlob(try VersionList(record: record, key: key).current) else { return nil }
        return .some(data)
    }

    /// `fromMemory`'s answer, nil when it has none.
    private static func answer<R>(_ fromMemory: () throws -> R?) -> Result<R, any Error>? {
        do {
            return try fromMemory().map { .success($0) }
        } catch {
            return .failure(error)
        }
    }

    /// Runs `body` on one of the store's I/O threads with the store. The first call on an engine that
    /// has not opened its store yet opens it on a Dispatch thread (the store's threads do not exist
    /// before it does) and runs `body` there.
    private func onStoreThreads(_ body: @escaping @Sendable (Result<Store, any Error>) -> Void) {
        if let store = openStore {
            store.startBlocking { body(.success(store)) }
        } else {
            DispatchQueue.global().async { body(Result { try self.store() }) }
        }
    }
}

/// One async call between the task awaiting it and the store thread running it.
///
/// Whoever moves it out of `waiting` owns the continuation: the lane starting it (`begin`), or the
/// task's cancellation, which resumes the task at once and leaves the turn to pass unused.
final class AsyncCall<R: Sendable>: Sendable {
    private enum Phase {
        /// Queued; the continuation is nil until installed, `cancelled` once the task was.
        case waiting(CheckedContinuation<R, any Error>?, cancelled: Bool)
        case running(CheckedContinuation<R, any Error>, cancelled: Bool)
        /// Resumed (cancelled while waiting, or finished).
        case done
    }

    private let phase = Mutex<Phase>(.waiting(nil, cancelled: false))

    /// Stores the continuation; false (having resumed it with `CancellationError`) when the task was
    /// cancelled before the call could be queued.
    func install(_ continuation: CheckedContinuation<R, any Error>) -> Bool {
        let cancelled = phase.withLock { phase -> Bool in
            guard case .waiting(nil, let cancelled) = phase else { return true }
            phase = cancelled ? .done : .waiting(continuation, cancelled: false)
            return cancelled
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    /// The lane reached the call: true when it is to run, false when its task has already been resumed.
    func begin() -> Bool {
        phase.withLock { phase in
            guard case .waiting(let continuation?, _) = phase else { return false }
            phase = .running(continuation, cancelled: false)
            return true
        }
    }

    /// The task was cancelled: a waiting call is resumed with `CancellationError` now; a running one
    /// learns it at its next ``checkCancellation()``.
    func cancel() {
        let resume = phase.withLock { phase -> CheckedContinuation<R, any Error>? in
            switch phase {
            case .waiting(let continuation, _):
                phase = continuation == nil ? .waiting(nil, cancelled: true) : .done
                return continuation
            case .running(let continuation, _):
                phase = .running(continuation, cancelled: true)
                return nil
            case .done:
                return nil
            }
        }
        resume?.resume(throwing: CancellationError())
    }

    /// Throws `CancellationError` once the calling task has been cancelled.
    func checkCancellation() throws {
        let cancelled = phase.withLock { phase in
            if case .running(_, cancelled: true) = phase { return true }
            return false
        }
        if cancelled { throw CancellationError() }
    }

    /// Hands the running call's result to its task.
    func finish(_ result: Result<R, any Error>) {
        let resume = phase.withLock { phase -> CheckedContinuation<R, any Error>? in
            guard case .running(let continuation, _) = phase else { return nil }
            phase = .done
            return continuation
        }
        resume?.resume(with: result)
    }
}
