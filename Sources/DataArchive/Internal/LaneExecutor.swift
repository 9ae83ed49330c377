import Dispatch
import Synchronization

/// Runs jobs one at a time per *lane*, in the order they were submitted, with different lanes
/// running in parallel on at most `width` threads.
///
/// Each lane with work is a FIFO of jobs. A lane is either idle (absent), waiting in the ready
/// queue, or running on exactly one worker (or on the thread that claimed it with
/// ``runIfIdle(_:_:)``). A worker takes the lane at the head of the ready
/// queue, runs a batch of its first jobs in order, and puts the lane back at the tail if it has
/// more, so lanes share the workers round-robin and one busy lane cannot starve the others. Workers are `width` serial
/// dispatch queues (each gets its own thread while it has work), so the thread count is bounded
/// and a worker blocked in `fsync` does not depend on the global pool growing.
///
/// Every job gets a ticket in submission order; ``waitUntilFinished(through:)`` blocks until every
/// job with a ticket up to a given one has run. Jobs never wait for other jobs, so waiting from any
/// thread except a worker cannot deadlock.
///
/// A batch is handed to `Job.run` as a whole, so a job type can coalesce consecutive jobs of a lane
/// (``OperationJob`` commits consecutive mutations of one key together).
///
/// A *turn* (``takeTurn(_:_:)``) is a place in a lane for work that runs elsewhere (the async API's,
/// on the store's I/O threads): when the lane reaches it, it is started and the lane runs nothing
/// else until that work releases it. It ends a batch, and the worker that started it moves on.
final class LaneExecutor<Lane: Hashable & Sendable, Job: LaneJob>: Sendable {
    private struct Entry {
        var ticket: UInt64
        var work: Work
    }

    private enum Work {
        case job(Job)
        /// Started with the turn's release when the lane reaches it.
        case turn(@Sendable (_ release: @escaping @Sendable () -> Void) -> Void)
    }

    /// What a worker takes next: a batch of jobs to run, or a turn to start.
    private enum Turn {
        case batch(Lane, tickets: [UInt64], jobs: [Job])
        case turn(Lane, ticket: UInt64, start: @Sendable (_ release: @escaping @Sendable () -> Void) -> Void)
    }

    private struct Waiter {
        /// Waits for every job with a ticket up to this one.
        var ticket: UInt64
        /// How many of those have not finished yet.
        var remaining: Int
        var semaphore: DispatchSemaphore
    }

    private struct State {
        var lanes: [Lane: FIFO<Entry>] = [:]
        var ready = FIFO<Lane>()
        var idleWorkers: [Int]
        /// Workers started and not yet idle again.
        var active = 0
        /// Active workers running a batch (the others are between batches and will look at `ready`).
        var busy = 0
        var lastTicket: UInt64 = 0
        /// Whether ``unfinished`` is kept, for ``LaneExecutor/waitUntilFinished(through:)``.
        let tracksTickets: Bool
        var unfinished: Set<UInt64> = []
        var waiters: [Waiter] = []

        /// Marks a job finished and releases the waiters it was the last one for.
        mutating func finish(_ ticket: UInt64) {
            guard tracksTickets else { return }
            unfinished.remove(ticket)
            guard !waiters.isEmpty else { return }
            var released = false
            for index in waiters.indices where ticket <= waiters[index].ticket {
                waiters[index].remaining -= 1
                if waiters[index].remaining == 0 {
                    waiters[index].semaphore.signal()
                    released = true
                }
            }
            if released { waiters.removeAll { $0.remaining == 0 } }
        }

        /// Issues the next ticket, counted unfinished until ``finish(_:)``.
        mutating func takeTicket() -> UInt64 {
            lastTicket += 1
            if tracksTickets { unfinished.insert(lastTicket) }
            return lastTicket
        }

        /// Puts `lane`, which has jobs and none running, in the ready queue; returns a worker to start
        /// if the ones between batches cannot take every ready lane. Short jobs then run on few
        /// threads (little lock contention), while jobs that block (fsync, a slow converter) make the
        /// others busy and so bring in more, up to the width.
        mutating func makeReady(_ lane: Lane) -> Int? {
            ready.append(lane)
            guard ready.count > active - busy, let worker = idleWorkers.popLast() else { return nil }
            active += 1
            return worker
        }
    }

    private let workers: [DispatchQueue]
    private let state: Mutex<State>
    private let identity: Int

    /// `waitable: false` spares every job and claim the bookkeeping ``waitUntilFinished(through:)``
    /// needs, for an executor nothing waits on (the completion executor: a set of tickets is a
    /// hash insert and remove per job).
    init(label: String, width: Int, waitable: Bool = true) {
        precondition(width > 0)
        let identity = nextExecutorIdentity.add(1, ordering: .relaxed).newValue
        self.identity = identity
        workers = (0 ..< width).map { index in
            let queue = DispatchQueue(label: "\(label).\(index)")
            queue.setSpecific(key: workerSpecificKey, value: identity)
            return queue
        }
        state = Mutex(State(idleWorkers: Array((0 ..< width).reversed()), tracksTickets: waitable))
    }

    /// Whether the calling thread is running one of this executor's jobs.
    var isCurrentThreadWorker: Bool {
        DispatchQueue.getSpecific(key: workerSpecificKey) == identity
    }

    /// The ticket of the most recently submitted job (0 before the first).
    var lastTicket: UInt64 { state.withLock { $0.lastTicket } }

    /// Queues `job` on `lane`; it runs after every job submitted to `lane` before it.
    /// Returns the job's ticket.
    @discardableResult
    func submit(_ lane: Lane, _ job: Job) -> UInt64 {
        let (ticket, worker) = state.withLock { state -> (UInt64, Int?) in
            let ticket = state.takeTicket()
            let entry = Entry(ticket: ticket, work: .job(job))
            if state.lanes[lane] != nil {
                state.lanes[lane]!.append(entry)
                return (ticket, nil)
            }
            var jobs = FIFO<Entry>()
            jobs.append(entry)
            state.lanes[lane] = jobs
            return (ticket, state.makeReady(lane))
        }
        if let worker { start(worker) }
        return ticket
    }

    /// A lane taken by ``claimIfIdle(_:)``, as though a job ran on it, until ``release(_:)``.
    struct Claim: Sendable {
        fileprivate let lane: Lane
        fileprivate let ticket: UInt64
    }

    /// Takes the lane as its next job, if it is idle (no job queued or running); nil otherwise.
    ///
    /// Until ``release(_:)``, which any thread may call, the lane counts as running: jobs submitted
    /// to it wait, and so do waiters for a later ticket.
    func claimIfIdle(_ lane: Lane) -> Claim? {
        state.withLock { state -> Claim? in
            // One hash of the lane when it is idle (the common case of a prompt read), two when not.
            if let queued = state.lanes.updateValue(FIFO(), forKey: lane) {
                state.lanes[lane] = queued
                return nil
            }
            return Claim(lane: lane, ticket: state.takeTicket())
        }
    }

    /// Ends a claim: the jobs submitted to its lane meanwhile run next.
    func release(_ claim: Claim) {
        release(claim.lane, claim.ticket)
    }

    /// Runs `body` on the calling thread as the lane's next job, if the lane is idle (no job queued
    /// or running); returns nil without running it otherwise.
    ///
    /// It saves the two thread switches of a submitted job (to a worker and back) for work the
    /// caller waits for anyway. Meanwhile the lane counts as running (``claimIfIdle(_:)``).
    func runIfIdle<R>(_ lane: Lane, _ body: () throws -> R) rethrows -> R? {
        guard let claim = claimIfIdle(lane) else { return nil }
        defer { release(claim) }
        return try body()
    }

    /// Queues a turn on `lane` for work that runs on other threads: `start` is called once every job
    /// submitted to the lane before it has run — at once, on the calling thread, when the lane is
    /// idle — with the turn's `release`, which the work calls exactly once when it is done. Until
    /// then the lane counts as running, as for ``runIfIdle(_:_:)``. `start` must not block: it hands
    /// the work to its threads and returns.
    func takeTurn(_ lane: Lane, _ start: @escaping @Sendable (_ release: @escaping @Sendable () -> Void) -> Void) {
        let idleTicket = state.withLock { state -> UInt64? in
            let ticket = state.takeTicket()
            if state.lanes[lane] == nil {
                state.lanes[lane] = FIFO()
                return ticket
            }
            state.lanes[lane]!.append(Entry(ticket: ticket, work: .turn(start)))
            return nil
        }
        if let idleTicket { start { self.release(lane, idleTicket) } }
    }

    /// Ends the job or turn `ticket`, which held `lane` outside the workers, and makes the lane ready
    /// if jobs were queued behind it.
    private func release(_ lane: Lane, _ ticket: UInt64) {
        let worker = state.withLock { state -> Int? in
            state.finish(ticket)
            // Removed and put back only when jobs were queued behind the claim: one hash otherwise.
            guard let queued = state.lanes.removeValue(forKey: lane) else { preconditionFailure("a lane released twice") }
            guard !queued.isEmpty else { return nil }
            state.lanes[lane] = queued
            return state.makeReady(lane)
        }
        if let worker { start(worker) }
    }

    private func start(_ worker: Int) {
        workers[worker].async { self.work(worker) }
    }

    /// Runs lanes until none is ready. Each turn takes up to `batchLimit` queued jobs of one lane
    /// and runs them in order; the bookkeeping for a finished batch and the choice of the next one
    /// share one critical section, so the lock is taken once per batch, not twice per job.
    private func work(_ worker: Int) {
        var finished: (lane: Lane, tickets: [UInt64])?
        while true {
            let next = state.withLock { state -> Turn? in
                if let (lane, tickets) = finished {
                    state.busy -= 1
                    for ticket in tickets { state.finish(ticket) }
                    if state.lanes[lane]!.isEmpty {
                        state.lanes[lane] = nil
                    } else {
                        state.ready.append(lane)
                    }
                }
                guard let lane = state.ready.popFirst() else {
                    state.active -= 1
                    state.idleWorkers.append(worker)
                    return nil
                }
                // A lane is in the ready queue only while it has jobs and none of them is running.
                // A turn at its head leaves it held (neither ready nor busy) until the turn's release.
                if let head = state.lanes[lane]!.first, case .turn(let start) = head.work {
                    _ = state.lanes[lane]!.popFirst()
                    return .turn(lane, ticket: head.ticket, start: start)
                }
                state.busy += 1
                var tickets: [UInt64] = []
                var jobs: [Job] = []
                while jobs.count < LaneExecutor.batchLimit, let entry = state.lanes[lane]!.first, case .job(let job) = entry.work {
                    _ = state.lanes[lane]!.popFirst()
                    tickets.append(entry.ticket)
                    jobs.append(job)
                }
                return .batch(lane, tickets: tickets, jobs: jobs)
            }
            switch next {
            case nil:
                return
            case .batch(let lane, let tickets, let jobs)?:
                Job.run(jobs)
                finished = (lane, tickets)
            case .turn(let lane, let ticket, let start)?:
                start { self.release(lane, ticket) }
                finished = nil
            }
        }
    }

    /// Most jobs of one lane run per turn before other lanes get theirs.
    private static var batchLimit: Int { 32 }

    /// Blocks until every job with a ticket up to `ticket` has run. Returns at once when called on
    /// one of this executor's workers (waiting there could wait for the caller itself).
    func waitUntilFinished(through ticket: UInt64) {
        precondition(state.withLock { $0.tracksTickets }, "waitUntilFinished on an executor made with waitable: false")
        guard !isCurrentThreadWorker else { return }
        let semaphore = DispatchSemaphore(value: 0)
        let mustWait = state.withLock { state in
            let remaining = state.unfinished.count { $0 <= ticket }
            guard remaining > 0 else { return false }
            state.waiters.append(Waiter(ticket: ticket, remaining: remaining, semaphore: semaphore))
            return true
        }
        if mustWait { semaphore.wait() }
    }
}

/// Work a ``LaneExecutor`` runs.
protocol LaneJob: Sendable {
    /// Runs consecutive jobs of one lane, in order.
    static func run(_ batch: [Self])
}

/// A job that is just a closure.
struct ClosureJob: LaneJob {
    let body: @Sendable () -> Void

    static func run(_ batch: [ClosureJob]) {
        for job in batch { job.body() }
    }
}

extension LaneExecutor where Job == ClosureJob {
    /// Queues `body` on `lane`; it runs after every job submitted to `lane` before it.
    @discardableResult
    func submit(_ lane: Lane, _ body: @escaping @Sendable () -> Void) -> UInt64 {
        submit(lane, ClosureJob(body: body))
    }
}

private let nextExecutorIdentity = Atomic<Int>(0)
private let workerSpecificKey = DispatchSpecificKey<Int>()
