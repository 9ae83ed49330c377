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
/// completion's address: the caller hands it over with one compare-exchange (``handOff(_:)``)
/// that claims the thread and posts the completion at once. When the thread is asleep, the caller
/// instead posts it before its read (``post(_:)``, address | ``notReady``) so that the thread's
/// wake-up overlaps the read, then publishes it (``publish(_:)``, the address alone) once the
/// result is in the completion; not when the thread spins, where the second write of the slot
/// costs the caller a crossing and saves none (Docs/dataarchive.md). The thread runs it
/// and clears the slot, and the caller, polling it, sees that; a caller that stops waiting marks it
/// (``abandoned``) with another compare-exchange, so the word alone decides who ends the claim. A
/// caller descheduled between post and publish holds the thread for ``postedSpin`` at most: the
/// thread then marks the slot (``sleeping``) and sleeps until the publish wakes it. The thread
/// only reads the completion (no reference count of its own while the caller waits: the caller's
/// keeps it alive), and the lane table stays with the caller, which claimed the lane and ends the
/// claim. The thread reads the event it sleeps on only before it sleeps, so a hand-off's
/// notification writes a line no other core holds.
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
    /// How long the thread waits for a posted completion's read to finish before it sleeps until the
    /// publish, in nanoseconds: a read of a small value takes one or two microseconds, so only a
    /// caller descheduled mid-read (or a read of a large value) runs past it.
    static let postedSpin: UInt64 = 20_000

    /// The address of the completion handed over and not yet run, with ``notReady`` set from its
    /// post to its publish (and ``sleeping`` once the thread stopped waiting for the publish), and
    /// ``abandoned`` set once its caller stopped waiting for it to run (then the thread holds a
    /// reference and ends the claim); 0 while the thread is free. Objects are 16-byte aligned, so
    /// the address leaves the low bits to the flags.
    private let slot = Atomic<UInt>(0)
    private static let abandoned: UInt = 1
    private static let notReady: UInt = 2
    private static let sleeping: UInt = 4
    private static let flags: UInt = abandoned | notReady | sleeping
    /// Notified on every hand-off; the thread sleeps on it once it has spun.
    private let posted = EventCount()
    /// Whether the thread is asleep waiting for work (a hint: set just before it sleeps, cleared
    /// when it wakes), so that a caller posts before its read only when that saves a wake-up's wait.
    private let asleep = Atomic<Bool>(false)

    private init() {
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff"
        thread.start()
    }

    /// Hands `completion` to the thread if it is free, ready to run; false when it is busy with
    /// another (then nothing here runs `completion` or ends its claim). After true, the caller passes
    /// it to ``waitBriefly(_:)``, holding it until that returns.
    func handOff(_ completion: HandedCompletion) -> Bool {
        guard post(completion) else { return false }
        publish(completion)
        return true
    }

    /// Whether the thread is asleep, so that a completion posted now (``post(_:)``) before a read
    /// has the thread's wake-up overlap the read. While the thread spins, posting early costs the
    /// caller one more exclusive fetch of the slot's line (post, then publish) and saves nothing:
    /// the thread must fetch the line again after the publish either way.
    var isAsleep: Bool { asleep.load(ordering: .relaxed) }

    /// Claims the thread for `completion` before it is ready to run (its result still being read),
    /// if the thread is free; false when it is busy (then nothing here runs `completion` or ends its
    /// claim). After true, the caller must ``publish(_:)`` it, and soon: until then the thread
    /// takes no other completion.
    func post(_ completion: HandedCompletion) -> Bool {
        guard slot.compareExchange(expected: 0, desired: Self.address(completion) | Self.notReady, ordering: .sequentiallyConsistent).exchanged else {
            return false
        }
        // Wakes a sleeping thread now, so its wake-up overlaps the read rather than following it.
        posted.notifyAll()
        return true
    }

    /// Marks the posted `completion` ready: the thread runs it next. Then the caller passes it to
    /// ``waitBriefly(_:)``, holding it until that returns.
    func publish(_ completion: HandedCompletion) {
        // Releasing: the result written into the completion is visible to the thread that runs it.
        let previous = slot.exchange(Self.address(completion), ordering: .sequentiallyConsistent)
        precondition(previous & ~Self.flags == Self.address(completion) && previous & Self.notReady != 0, "a completion published without its post")
        if previous & Self.sleeping != 0 { posted.notifyAll() }
    }

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
            if word & Self.notReady != 0 {
                awaitPublish(word)
                continue
            }
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

    /// Waits for the posted completion in `word` to be published: polling for ``postedSpin``, then
    /// asleep, with ``sleeping`` set so that the publish wakes it. Returns when the slot changed (or
    /// on a spurious wake-up, after which the loop looks again).
    private func awaitPublish(_ word: UInt) {
        if word & Self.sleeping == 0, SpinWait.until(nanoseconds: Self.postedSpin, { slot.load(ordering: .relaxed) != word }) { return }
        // The key before the mark (or, once marked, the last look): a publish after either sees the
        // mark and notifies, which changes the key, and the wait returns.
        let key = posted.key
        if word & Self.sleeping != 0 {
            guard slot.load(ordering: .sequentiallyConsistent) == word else { return }
        } else {
            guard slot.compareExchange(expected: word, desired: word | Self.sleeping, ordering: .sequentiallyConsistent).exchanged else { return }
        }
        posted.wait(key)
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

    /// The slot's word, for tests that follow its phases.
    package var slotWord: UInt { slot.load(ordering: .acquiring) }

    /// The ``sleeping`` flag, for tests that check the thread sleeps through a late publish.
    package static var sleepingFlag: UInt { sleeping }

    private static func address(_ completion: HandedCompletion) -> UInt {
        UInt(bitPattern: Unmanaged.passUnretained(completion).toOpaque())
    }
}
