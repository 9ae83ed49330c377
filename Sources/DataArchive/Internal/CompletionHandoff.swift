import ContentStore
import Foundation
import Synchronization

/// A completion ready to run on the hand-off thread, with the claim of its key's completion lane
/// that it holds until it has run. ``Delivery`` is the one kind: a read's result and its handler,
/// in one object, the only allocation a prompt callback read makes for its hand-off.
///
/// `@unchecked`: a class open to its one subclass cannot be checked; every stored property is a
/// `let` of a `Sendable` type or an atomic.
class HandedCompletion: @unchecked Sendable {
    let completions: LaneExecutor<Lane, ClosureJob>
    let claim: LaneExecutor<Lane, ClosureJob>.Claim
    /// ``CompletionHandoff/running`` until the handler has run (``CompletionHandoff/done``) or its
    /// caller stopped waiting (``CompletionHandoff/abandoned``): the first compare-exchange decides
    /// who ends the claim.
    fileprivate let phase = Atomic<UInt8>(CompletionHandoff.running)

    init(completions: LaneExecutor<Lane, ClosureJob>, claim: LaneExecutor<Lane, ClosureJob>.Claim) {
        self.completions = completions
        self.claim = claim
    }

    /// Runs the handler; the subclass's.
    func run() {}
}

/// One thread that runs a completion handed to it while it is free, and stays awake for a short
/// while after each, so that the next hand-off costs a store to memory instead of a wake-up.
///
/// Owns: at most one completion runs here at a time, and a hand-off succeeds only while none does,
/// so a slow handler never holds up another key's (the caller then queues its handler on the
/// completion executor, as every other completion is). Handlers run on this thread, never on the
/// caller's stack. A completion's claim of its key's completion lane ends exactly once, after its
/// handler has run, so later completions of the key follow it: by the caller when it saw the
/// handler finish, else (the caller stopped waiting first) by the thread.
///
/// Why: a callback `get` of a small value reads in a microsecond or two on the caller's thread, and
/// its completion must run elsewhere. Queued on a dispatch queue, the completion first wakes an idle
/// worker thread, and a caller waiting for it then sleeps until the completion wakes it: two
/// wake-ups, tens of microseconds each on a virtual machine, for a read that took one or two. Here
/// the thread is usually still spinning from the last hand-off, and the caller spins briefly until
/// its completion has run (``waitBriefly(_:)``), so a caller that waits for it finds it done.
///
/// A hand-off round trip is cache lines crossing between two cores, a hundred or more nanoseconds
/// each on a virtual machine, so it crosses as few as it can: the slot is one word, the
/// completion's pointer, which the caller sets with one compare-exchange (claiming the thread and
/// posting the job at once) and the thread clears when the handler has run; the completion object
/// and what the handler touches follow. The lane table stays with the caller, which claimed the
/// lane and ends the claim.
final class CompletionHandoff: Sendable {
    /// The process's one hand-off thread, started on first use; when idle it sleeps (no CPU).
    static let shared = CompletionHandoff()

    /// How long the thread keeps polling for the next hand-off after running one, in nanoseconds: a
    /// caller that waits for each completion and calls again (a loop of reads) is back well within
    /// it; then the thread sleeps.
    static let threadSpin: UInt64 = 50_000
    /// How long a caller waits for its handler to run, in nanoseconds: a handler on the spinning
    /// thread starts within about a microsecond; one that had to wake the thread may not make it.
    static let callerSpin: UInt64 = 20_000

    /// A ``HandedCompletion``'s phases.
    fileprivate static let running: UInt8 = 0, done: UInt8 = 1, abandoned: UInt8 = 2

    /// The completion handed over and not yet run, retained; nil while the thread is free.
    private let slot = Atomic<Unmanaged<HandedCompletion>?>(nil)
    /// Notified on every hand-off; the thread sleeps on it once it has spun.
    private let posted = EventCount()

    private init() {
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff"
        thread.start()
    }

    /// Hands `completion` to the thread if it is free; false when it is busy with another (then
    /// nothing here runs `completion` or ends its claim). After true, pass it to ``waitBriefly(_:)``.
    func handOff(_ completion: HandedCompletion) -> Bool {
        let retained = Unmanaged.passRetained(completion)
        guard slot.compareExchange(expected: nil, desired: retained, ordering: .sequentiallyConsistent).exchanged else {
            retained.release()
            return false
        }
        posted.notifyAll()
        return true
    }

    /// Returns once `completion`'s handler has run, or after ``callerSpin``, whichever is first: the
    /// caller goes on either way, so a handler that blocks holds the caller for no longer than that.
    /// Ends the completion's claim when its handler has run by then; else the thread ends it after.
    func waitBriefly(_ completion: HandedCompletion) {
        let mine = Unmanaged.passUnretained(completion).toOpaque()
        // The caller's reference keeps the address from being reused while it compares.
        let finished = SpinWait.until(nanoseconds: Self.callerSpin) { slot.load(ordering: .acquiring)?.toOpaque() != mine }
        if finished || !completion.phase.compareExchange(expected: Self.running, desired: Self.abandoned, ordering: .acquiringAndReleasing).exchanged {
            completion.completions.release(completion.claim)
        }
    }

    private func loop() {
        while true {
            let key = posted.key
            if let completion = slot.load(ordering: .sequentiallyConsistent) {
                run(completion)
                continue
            }
            if SpinWait.until(nanoseconds: Self.threadSpin, { slot.load(ordering: .relaxed) != nil }) { continue }
            posted.wait(key)
        }
    }

    private func run(_ retained: Unmanaged<HandedCompletion>) {
        let completion = retained.takeRetainedValue()
        completion.run()
        if !completion.phase.compareExchange(expected: Self.running, desired: Self.done, ordering: .acquiringAndReleasing).exchanged {
            completion.completions.release(completion.claim)  // abandoned: its caller left the claim to us
        }
        slot.store(nil, ordering: .releasing)
    }
}
