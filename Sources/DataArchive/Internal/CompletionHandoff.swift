import ContentStore
import Foundation
import Synchronization

/// Threads, one per core, that each run a completion handler handed to them while they are free,
/// and stay awake for a short while after each, so that the next hand-off costs a store to memory
/// instead of a wake-up.
///
/// Owns: a thread runs at most one handed-over job at a time, and a hand-off to it succeeds only
/// while it has none, so a slow handler never holds up another key's (the caller tries the next
/// thread, and when every one is busy queues its handler on the completion executor, as every other
/// completion is). Handlers run on these threads, never on the caller's stack. A job's claim of its
/// key's completion lane ends exactly once, after its handler has run, so later completions of the
/// key follow it: by the caller when it saw the handler finish (so the lane table stays in the
/// caller's cache; the thread touches nothing but its own slot), else by the thread.
///
/// Why: a callback `get` of a small value reads in a microsecond or two on the caller's thread, and
/// its completion must run elsewhere. Queued on a dispatch queue, the completion first wakes an idle
/// worker thread, and a caller waiting for it then sleeps until the completion wakes it: two
/// wake-ups, each a futex call on both sides and tens of microseconds on a virtual machine, for a
/// read that took one or two.
///
/// Both sides spin only where spinning pays off, as measured while they run; on a busy machine,
/// where a thread waits for a core far longer than any spin, neither does, and a hand-off costs
/// about what a dispatch queue's would.
/// - The caller waits for its handler briefly (``waitBriefly(_:)``), and only when it handed it to
///   a thread that was awake (polling): until the thread picks it up (within ``pickupSpin``; a thread
///   on a core does within a microsecond), then for at most ``callerSpin`` while the handler runs. A
///   caller that waits for its completion next (a semaphore, a group) so finds it already run,
///   instead of sleeping until the handler wakes it (a futex call on both sides and a wake-up). One
///   that does not wait loses the handler's time, at most ``callerSpin``. A thread that was asleep
///   is never waited for: its wake-up takes longer than any spin, and on a busy machine the woken
///   thread is often queued behind the spinning caller on the caller's own core.
/// - After a job, a thread polls for the next for ``threadSpin`` only if its last idle gap (from the
///   end of a job to the next hand-off) was within it, that is when polling would have caught the
///   job; otherwise it sleeps at once. A loop of reads keeps it polling; callers that come back more
///   slowly cost it no CPU. One idle period in ``probeInterval`` it polls for ``probeSpin`` instead,
///   so that callers that sleep between calls only because the thread did (each waiting for the
///   other's wake-up) get back to polling.
final class CompletionHandoff: Sendable {
    /// A completion handed over: the handler, and the completion-lane claim it ends once it has run.
    struct Job: Sendable {
        let handler: @Sendable () -> Void
        let completions: LaneExecutor<Lane, ClosureJob>
        let claim: LaneExecutor<Lane, ClosureJob>.Claim
    }

    /// A job accepted by one of the threads, for its caller to pass to ``waitBriefly(_:)`` once.
    struct Ticket: Sendable {
        fileprivate let thread: Int
        fileprivate let sequence: UInt64
        /// The job's claim, for the caller to end when it saw the handler finish.
        fileprivate let completions: LaneExecutor<Lane, ClosureJob>
        fileprivate let claim: LaneExecutor<Lane, ClosureJob>.Claim
        /// How long the caller may wait for the thread to pick the job up: 0 (not at all) when it
        /// was asleep.
        fileprivate let pickupBudget: UInt64
    }

    /// The process's hand-off threads, one per core (started now, asleep until first used).
    static let shared = CompletionHandoff(threads: ProcessInfo.processInfo.activeProcessorCount)

    /// How long a thread keeps polling for its next job after running one, in nanoseconds: a caller
    /// that waits for each completion and calls again (a loop of reads) is back well within it;
    /// then the thread sleeps, so a thread whose callers are slower burns at most this per job.
    static let threadSpin: UInt64 = 20_000
    /// How long a caller waits for an awake thread to pick its job up, in nanoseconds: a thread on a
    /// core does within a microsecond; one that has not by then has been descheduled.
    static let pickupSpin: UInt64 = 3_000
    /// How long a caller waits for a picked-up handler to finish, in nanoseconds; the caller goes on
    /// either way, so a handler that blocks holds its caller for no longer than that.
    static let callerSpin: UInt64 = 20_000
    /// A thread that does not poll after its jobs still does after one in this many, for `probeSpin`
    /// nanoseconds: long enough to catch a caller that was woken by its completion and calls again.
    static let probeInterval = 64
    static let probeSpin: UInt64 = 100_000

    private let threads: [HandoffThread]

    init(threads count: Int) {
        threads = (0 ..< max(1, count)).map { HandoffThread(index: $0) }
    }

    /// Hands `job` to the first free thread; nil when every thread is busy (then nothing runs it).
    /// Trying them in order keeps a lone caller on the first, the one still spinning from its last
    /// job; a second caller at the same time takes the second, so neither falls back to the queue.
    func handOff(_ job: Job) -> Ticket? {
        for (index, thread) in threads.enumerated() {
            if let (sequence, budget) = thread.take(job) {
                return Ticket(thread: index, sequence: sequence, completions: job.completions, claim: job.claim, pickupBudget: budget)
            }
        }
        return nil
    }

    /// Returns once the ticket's handler has run, or as soon as waiting for it would take long: at
    /// once when its thread was asleep, when its thread has not started it within ``pickupSpin``, or
    /// after ``callerSpin`` when the handler is still running. Ends the job's lane claim if the
    /// handler has run by then; else the thread ends it after the handler. Call it once per ticket.
    func waitBriefly(_ ticket: Ticket) {
        let thread = threads[ticket.thread]
        if ticket.pickupBudget > 0,
           SpinWait.until(nanoseconds: ticket.pickupBudget, { thread.started(ticket.sequence) }),
           SpinWait.until(nanoseconds: Self.callerSpin, { thread.finished(ticket.sequence) }) {
            return ticket.completions.release(ticket.claim)
        }
        if !thread.abandon(ticket.sequence) { ticket.completions.release(ticket.claim) }
    }
}

/// One hand-off thread: a slot for one job, the job's sequence numbers, and the event it sleeps on.
private final class HandoffThread: Sendable {
    private struct Entry {
        var job: CompletionHandoff.Job
        var sequence: UInt64
        /// When the job was handed over (uptime nanoseconds).
        var handedAt: UInt64
    }

    /// Whether a job is handed over and not finished (the slot is taken).
    private let busy = Atomic<Bool>(false)
    private let slot = Mutex<Entry?>(nil)
    /// Jobs handed over so far; the holder of `busy` numbers the next.
    private let handedOver = Atomic<UInt64>(0)
    /// The sequence number of the last job the thread picked up.
    private let lastStarted = Atomic<UInt64>(0)
    /// The current job's sequence number (shifted left by 2) and phase: ``running``, ``done`` (its
    /// handler has run while its caller still waited: the caller ends the claim) or ``abandoned``
    /// (its caller stopped waiting first: the thread ends the claim). One compare-exchange on each
    /// side decides which.
    private let jobState = Atomic<UInt64>(0)
    private static let running: UInt64 = 0, done: UInt64 = 1, abandoned: UInt64 = 2
    /// Set while the thread sleeps on `posted` (or is about to).
    private let asleep = Atomic<Bool>(false)
    /// Notified on every hand-off; the thread sleeps on it when it does not poll.
    private let posted = EventCount()

    init(index: Int) {
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff.\(index)"
        thread.start()
    }

    /// Takes `job` if the thread is free: its sequence number, and how long its caller may wait for
    /// the thread to pick it up.
    func take(_ job: CompletionHandoff.Job) -> (sequence: UInt64, pickupBudget: UInt64)? {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return nil }
        let sequence = handedOver.add(1, ordering: .relaxed).newValue
        jobState.store(sequence << 2 | Self.running, ordering: .sequentiallyConsistent)
        slot.withLock { $0 = Entry(job: job, sequence: sequence, handedAt: DispatchTime.now().uptimeNanoseconds) }
        posted.notifyAll()
        return (sequence, asleep.load(ordering: .sequentiallyConsistent) ? 0 : CompletionHandoff.pickupSpin)
    }

    func started(_ sequence: UInt64) -> Bool { lastStarted.load(ordering: .acquiring) >= sequence }
    /// Whether job `sequence`'s handler has run, for its caller (which has not abandoned it): its
    /// state is no longer "running", whether it still reads "done" or the thread has since taken the
    /// next job, which it does only after marking this one.
    func finished(_ sequence: UInt64) -> Bool { jobState.load(ordering: .acquiring) != sequence << 2 | Self.running }

    /// Gives up waiting for job `sequence`: true when the thread will end its claim, false when its
    /// handler has already run (the caller ends it). After a false the thread may have moved on.
    func abandon(_ sequence: UInt64) -> Bool {
        jobState.compareExchange(expected: sequence << 2 | Self.running, desired: sequence << 2 | Self.abandoned,
                                 ordering: .sequentiallyConsistent).exchanged
    }

    private func loop() {
        var polls = true
        var idlePeriods = 0
        var idleSince = DispatchTime.now().uptimeNanoseconds
        while true {
            let key = posted.key
            if let entry = slot.withLock({ slot in defer { slot = nil }; return slot }) {
                lastStarted.store(entry.sequence, ordering: .releasing)
                // Polling would have caught this job: poll after it too.
                polls = entry.handedAt <= idleSince || entry.handedAt - idleSince <= CompletionHandoff.threadSpin
                entry.job.handler()
                let state = entry.sequence << 2
                if !jobState.compareExchange(expected: state | Self.running, desired: state | Self.done,
                                             ordering: .sequentiallyConsistent).exchanged {
                    entry.job.completions.release(entry.job.claim)  // abandoned: its caller left it to us
                }
                busy.store(false, ordering: .releasing)
                idleSince = DispatchTime.now().uptimeNanoseconds
                idlePeriods += 1
                continue
            }
            let spin = polls ? CompletionHandoff.threadSpin : idlePeriods % CompletionHandoff.probeInterval == 0 ? CompletionHandoff.probeSpin : 0
            if spin > 0, SpinWait.until(nanoseconds: spin, { posted.key != key }) { continue }
            asleep.store(true, ordering: .sequentiallyConsistent)
            posted.wait(key)
            asleep.store(false, ordering: .sequentiallyConsistent)
        }
    }
}
