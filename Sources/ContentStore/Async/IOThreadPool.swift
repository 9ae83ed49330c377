#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The store's own threads for the blocking work behind its async API (file I/O, `fsync`, waiting
/// for a group commit or a lock), so that none of it runs on the Swift concurrency cooperative pool
/// or a SwiftNIO event loop — the role `NIOThreadPool` plays for SwiftNIO.
///
/// Invariant owned here: every submitted call's continuation is resumed exactly once, either by the
/// thread that ran it or, for a call still queued when its task is cancelled, by the cancellation
/// (with `CancellationError`, the work never started). Whoever removes a call from the queue owns it.
///
/// Threads are started on demand, up to ``maximumThreads``, and end after ``idleTimeout`` without
/// work, so a store used only through the blocking API never starts one. A call beyond the limit
/// waits in a FIFO queue: a thousand tasks awaiting commits hold at most `maximumThreads` threads and
/// none of the cooperative pool's.
final class IOThreadPool: Sendable {
    /// Threads running calls at most. An awaited commit holds one only while it waits for the writer
    /// lock and runs its body (``Store/write(_:)-(_)``): waiting for durability holds none, so this
    /// does not bound how many awaited commits share a group commit.
    static let defaultMaximumThreads = 64
    /// An idle thread ends after this long without work.
    static let idleTimeout: TimeInterval = 2

    let maximumThreads: Int
    private let condition = NSCondition()
    // Guarded by `condition` (NSCondition is its own lock), hence the unchecked box.
    private let state: UncheckedState

    private final class UncheckedState: @unchecked Sendable {
        var queue: [any PooledCall] = []
        var head = 0
        var threads = 0
        var idle = 0
        var queued: Int { queue.count - head }
    }

    init(maximumThreads: Int = IOThreadPool.defaultMaximumThreads) {
        self.maximumThreads = max(1, maximumThreads)
        state = UncheckedState()
    }

    /// Runs `operation` on one of the pool's threads and returns its result. A task cancelled while the
    /// call is still queued gets `CancellationError` at once and the operation never runs; once it runs,
    /// `token` tells it of the cancellation (``CancellationToken/current``), and long operations stop
    /// between batches.
    func run<T: Sendable>(_ operation: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(deferring: { PendingResult(try operation()) })
    }

    /// ``run(_:)`` for an operation whose result is due later (a commit's, once durable): the thread
    /// runs it, lets it go and returns to the pool; whoever makes the result due resumes the caller.
    func run<T: Sendable>(deferring operation: @escaping @Sendable () throws -> PendingResult<T>) async throws -> T {
        let call = Call(operation)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                call.continuation = continuation
                submit(call)
            }
        } onCancel: {
            call.token.cancel()
            if remove(call) { call.resume(throwing: CancellationError()) }
        }
    }

    /// Queues `work` for one of the pool's threads with no task awaiting it: for a facade whose own
    /// queue decides when blocking work starts (a key's turn) and which reports the outcome itself.
    func submit(_ work: @escaping @Sendable () -> Void) {
        submit(Detached(work))
    }

    private func submit(_ call: any PooledCall) {
        condition.lock()
        state.queue.append(call)
        let startThread = state.queued > state.idle && state.threads < maximumThreads
        if startThread { state.threads += 1 }
        condition.signal()
        condition.unlock()
        if startThread { startWorker() }
    }

    /// Takes `call` out of the queue; false when a thread has already taken it (or it was never queued).
    private func remove(_ call: any PooledCall) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard let index = state.queue[state.head...].firstIndex(where: { $0 === call }) else { return false }
        state.queue.remove(at: index)
        return true
    }

    private func startWorker() {
        let thread = Thread { [self] in work() }
        thread.name = "ContentStore I/O"
        thread.start()
    }

    private func work() {
        while let call = next() {
            call.execute()
        }
    }

    /// The next queued call, or nil once the thread has been idle for ``idleTimeout`` (it then ends).
    private func next() -> (any PooledCall)? {
        condition.lock()
        defer { condition.unlock() }
        while state.queued == 0 {
            state.idle += 1
            let signalled = condition.wait(until: Date(timeIntervalSinceNow: IOThreadPool.idleTimeout))
            state.idle -= 1
            if !signalled && state.queued == 0 {
                state.threads -= 1
                return nil
            }
        }
        let call = state.queue[state.head]
        state.head += 1
        // Compact now and then, so the queue's storage does not grow with every call ever made.
        if state.head > 64 && state.head * 2 > state.queue.count {
            state.queue.removeFirst(state.head)
            state.head = 0
        }
        return call
    }
}

/// A call waiting in or running on the pool, erased to its behaviour.
private protocol PooledCall: AnyObject, Sendable {
    func execute()
}

/// Work queued by ``IOThreadPool/submit(_:)``: it reports its own outcome.
private final class Detached: PooledCall, @unchecked Sendable {
    // Touched by the one thread that took the call from the queue. Released once run: the queue's
    // storage keeps taken calls until it compacts, and what the work captured (a snapshot's pin,
    // say) must not live that long.
    private var work: (@Sendable () -> Void)?

    init(_ work: @escaping @Sendable () -> Void) {
        self.work = work
    }

    func execute() {
        let work = self.work
        self.work = nil
        work?()
    }
}

/// One call: its operation, the continuation of the task awaiting it, and its cancellation token.
private final class Call<T: Sendable>: PooledCall, @unchecked Sendable {
    // `operation` and `continuation` are touched by one party at a time: set before the call is
    // queued, then used by whichever of the running thread and the cancellation took it from the queue.
    private var operation: (@Sendable () throws -> PendingResult<T>)?
    var continuation: CheckedContinuation<T, any Error>?
    let token = CancellationToken()

    init(_ operation: @escaping @Sendable () throws -> PendingResult<T>) {
        self.operation = operation
    }

    func execute() {
        // The operation is released (by `perform`) before the caller can resume: `Store`'s twins lend
        // it a closure that must not outlive the call (`withoutActuallyEscaping`).
        switch perform() {
        case .failure(let error):
            resume(with: .failure(error))
        case .success(let pending):
            pending.whenDue { failure in
                self.resume(with: failure.map { .failure($0) } ?? .success(pending.value))
            }
        }
    }

    private func resume(with result: Result<T, any Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }

    func resume(throwing error: any Error) {
        operation = nil
        continuation?.resume(throwing: error)
        continuation = nil
    }

    private func perform() -> Result<PendingResult<T>, any Error> {
        guard let operation else { return .failure(CancellationError()) }
        self.operation = nil
        // Cancelled before it was queued (the handler found nothing to remove): the work never starts.
        if token.isCancelled { return .failure(CancellationError()) }
        return CancellationToken.$current.withValue(token) {
            Result { try operation() }
        }
    }
}
