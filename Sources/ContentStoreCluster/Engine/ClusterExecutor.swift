import Dispatch
import Foundation
import Synchronization

/// Where the cluster's async work runs: threads of its own (a concurrent dispatch queue), never the
/// cooperative pool.
///
/// Owns one invariant: the blocking ``StoreEngine`` methods, which wait for async work on the
/// caller's thread, can never starve that work. A caller may itself be a cooperative-pool thread
/// (a synchronous test body, a synchronous call from an actor); if the work it waits on needed the
/// same pool, two such callers on two cores would deadlock. postgres-nio's pool loop and every
/// query body therefore run here, and the sockets stay on the libraries' own event loops.
final class ClusterExecutor: TaskExecutor, @unchecked Sendable {
    /// The one executor every cluster engine in the process shares.
    static let shared = ClusterExecutor()

    // @unchecked Sendable: a dispatch queue is thread-safe.
    private let queue = DispatchQueue(label: "ContentStoreCluster.async", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Runs `body` here and blocks the calling thread until it finishes: how a synchronous engine
    /// method waits for PostgreSQL or the object store. The wait itself has no deadline because
    /// every service call inside `body` has one (``ServiceDeadline``, the request timeout), so
    /// `body` ends when a service stops answering.
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        try start(body).wait()
    }

    /// Starts `body` here and returns at once; the caller waits for its result later (a chunked put
    /// uploads one pack while it fills the next).
    static func start<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> PendingResult<T> {
        let outcome = PendingResult<T>()
        Task(executorPreference: shared) {
            do {
                outcome.set(.success(try await body()))
            } catch {
                outcome.set(.failure(error))
            }
        }
        return outcome
    }
}

/// The result of work one thread waits for and another produces; it can be waited for any number
/// of times.
final class PendingResult<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func set(_ value: Result<T, any Error>) {
        result.withLock { $0 = value }
        done.signal()
    }

    func wait() throws -> T {
        done.wait()
        done.signal()
        return try result.withLock { $0! }.get()
    }

    /// The result, or nil when `timeout` passes first (the work goes on; a later wait may get it).
    func wait(timeout: Duration) throws -> T? {
        let (seconds, attoseconds) = timeout.components
        // Clamped to a century: a longer timeout is no timeout, and the product must not overflow.
        let nanoseconds = min(max(0, seconds), 3_155_760_000) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        guard done.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .success else { return nil }
        done.signal()
        return try result.withLock { $0! }.get()
    }
}
