import ContentStore
import Foundation
import Synchronization

/// A completion ready to run on the hand-off thread, with the claim of its key's completion lane
/// that it holds until it has run. ``Delivery`` is the one kind: a read's result and its handler,
/// in one object, the only allocation a prompt callback read makes for its hand-off.
///
/// `@unchecked`: a class open to its one subclass cannot be checked; every stored property is a
/// `let` of a `Sendable` type.
class HandedCompletion: @unchecked Sendable {
    let completions: LaneExecutor<Lane, ClosureJob>
    let claim: LaneExecutor<Lane, ClosureJob>.Claim

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
/// each on a virtual machine, so it crosses as few as it can. The slot is one word, the
/// completion's address: the caller sets it with one compare-exchange (claiming the thread and
/// posting the completion at once), the thread clears it when the handler has run, and a caller
/// that stops waiting marks it (its low bit) with another compare-exchange, so the word alone
/// decides who ends the claim. The thread only reads the completion (no reference count of its
/// own while the caller waits: the caller's keeps it alive), and the lane table stays with the
/// caller, which claimed the lane and ends the claim. The thread reads the event it sleeps on only
/// before it sleeps, so a hand-off's notification writes a line no other core holds.
///
/// A caller that finds the thread asleep wakes it before its read (``wakeIfAsleep()``), so the
/// wake-up overlaps the read and the thread is polling when the completion comes. The completion
/// itself is handed over after the read, in one write of the slot: handing it over earlier (posted,
/// then marked ready) writes the slot twice, and to a thread that polls, the second write costs the
/// caller one more crossing of the slot's line and saves none (Docs/benchmarks/analysis.md, "The
/// callback get, session 13"). A woken thread that gets nothing (its caller descheduled mid-read)
/// polls for ``threadSpin`` and sleeps again, as after any completion.
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

    /// The address of the completion handed over and not yet run, with ``abandoned`` set once its
    /// caller stopped waiting (then the thread holds a reference and ends the claim); 0 while the
    /// thread is free.
    private let slot = Atomic<UInt>(0)
    private static let abandoned: UInt = 1
    /// Notified on every hand-off; the thread sleeps on it once it has spun.
    private let posted = EventCount()
    /// Whether the thread is asleep waiting for work: set just before it sleeps, cleared when it
    /// wakes. A hint for ``wakeIfAsleep()``; nothing's correctness depends on it.
    private let asleep = Atomic<Bool>(false)

    private init() {
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff"
        thread.start()
    }

    /// Hands `completion` to the thread if it is free; false when it is busy with another (then
    /// nothing here runs `completion` or ends its claim). After true, the caller passes it to
    /// ``waitBriefly(_:)``, holding it until that returns.
    func handOff(_ completion: HandedCompletion) -> Bool {
        guard slot.compareExchange(expected: 0, desired: Self.address(completion), ordering: .sequentiallyConsistent).exchanged else { return false }
        posted.notifyAll()
        return true
    }

    /// Wakes the thread if it is asleep, so that it is polling for the hand-off that follows the
    /// caller's read instead of waking after it. Costs a load when the thread is awake.
    func wakeIfAsleep() {
        if asleep.load(ordering: .relaxed) { posted.notifyAll() }
    }

    /// Whether the thread is asleep (for tests that follow it).
    package var isAsleep: Bool { asleep.load(ordering: .relaxed) }

    /// Returns once `completion`'s handler has run, or after ``callerSpin``, whichever is first: the
    /// caller goes on either way, so a handler that blocks holds the caller for no longer than that.
    /// Ends the completion's claim when its handler has run by then; else the thread ends it after.
    func waitBriefly(_ completion: HandedCompletion) {
        let address = Self.address(completion)
        // The caller's reference keeps the address from being reused while it compares.
        if SpinWait.until(nanoseconds: Self.callerSpin, { slot.load(ordering: .acquiring) != address }) {
            return completion.completions.release(completion.claim)
        }
        // The thread keeps the completion alive from here, unless it finished meanwhile.
        let reference = Unmanaged.passRetained(completion)
        if slot.compareExchange(expected: address, desired: address | Self.abandoned, ordering: .acquiringAndReleasing).exchanged { return }
        reference.release()
        completion.completions.release(completion.claim)
    }

    private func loop() {
        while true {
            let word = slot.load(ordering: .acquiring)
            if word != 0 {
                run(word)
                continue
            }
            if SpinWait.until(nanoseconds: Self.threadSpin, { slot.load(ordering: .relaxed) != 0 }) { continue }
            // The key before the last look: a hand-off after that look changes it, and the wait returns.
            let key = posted.key
            if slot.load(ordering: .sequentiallyConsistent) != 0 { continue }
            asleep.store(true, ordering: .relaxed)
            posted.wait(key)
            asleep.store(false, ordering: .relaxed)
        }
    }

    private func run(_ word: UInt) {
        let address = word & ~Self.abandoned
        let completion = Unmanaged<HandedCompletion>.fromOpaque(UnsafeRawPointer(bitPattern: address)!)
        // Guaranteed by the waiting caller's reference, or by the one it left when it stopped waiting.
        completion._withUnsafeGuaranteedRef { $0.run() }
        if slot.compareExchange(expected: address, desired: 0, ordering: .acquiringAndReleasing).exchanged { return }
        // Abandoned: its caller left the claim and a reference to us.
        let abandoned = completion.takeRetainedValue()
        abandoned.completions.release(abandoned.claim)
        slot.store(0, ordering: .releasing)
    }

    private static func address(_ completion: HandedCompletion) -> UInt {
        UInt(bitPattern: Unmanaged.passUnretained(completion).toOpaque())
    }
}
