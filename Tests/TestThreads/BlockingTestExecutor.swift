import Foundation
import Synchronization

/// The threads tests that block run on, so that they leave Swift's cooperative pool to the tests
/// that await.
///
/// Invariant owned here: at most `width` jobs run at once, each on one of this executor's own
/// threads, in the order they were enqueued; no job ever runs on the cooperative pool.
///
/// Why: Swift Testing runs a synchronous test on the cooperative pool, which has one thread per
/// core (two on CI). A sweep or a soak that blocks for minutes holds one of them, two hold them
/// all, and every test that awaits (an HTTP server and its clients, a notification stream, a
/// polling loop) stops for as long: on a loaded machine a Sync request then waited past its timeout
/// and was sent again. Tests that block run here instead (``Trait/blocking``), `width` at a time as
/// before, while the pool stays free.
public final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    /// The one executor every test target shares: its width bounds the blocking tests of the whole
    /// process, whichever module they are in.
    public static let shared = BlockingTestExecutor(width: max(2, ProcessInfo.processInfo.activeProcessorCount))

    /// Jobs not yet taken by a thread, oldest first; guarded by `condition`.
    private var queue: [UnownedJob] = []
    private var head = 0
    private let condition = NSCondition()

    /// The threads' `pthread_self()`s, for ``isCurrentThread``.
    private let threads = Mutex<Set<pthread_t>>([])

    private init(width: Int) {
        for index in 0 ..< width {
            let thread = Thread { [self] in
                threads.withLock { _ = $0.insert(pthread_self()) }
                runJobs()
            }
            thread.name = "blocking test \(index)"
            thread.start()
        }
    }

    /// Whether the caller runs on one of this executor's threads.
    public var isCurrentThread: Bool {
        threads.withLock { $0.contains(pthread_self()) }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        queue.append(job)
        condition.signal()
        condition.unlock()
    }

    private func runJobs() -> Never {
        while true {
            next().runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    private func next() -> UnownedJob {
        condition.lock()
        defer { condition.unlock() }
        while head == queue.count { condition.wait() }
        let job = queue[head]
        head += 1
        // Drop the taken prefix once it is most of the array, so the queue stays small.
        if head > 64, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return job
    }
}
