import ContentStore
import Foundation
import Synchronization

/// A completion ready to run: the caller's handler and what it is called with.
protocol Completion: Sendable {
    /// Calls the handler. `mutating` (it mutates nothing) so that the hand-off thread calls it in
    /// place on the slot's copy: a call through a pointer to a non-mutating method copies the value
    /// first, retaining (and then releasing) every reference in it on the thread, and those counts'
    /// lines then cross back to the caller that releases them.
    mutating func run()
}

extension Completion {
    /// Runs a copy, for a completion held where it cannot be mutated (a queued job's capture).
    func runCopy() {
        var copy = self
        copy.run()
    }
}

/// A completion handed to the thread, as its caller keeps it until ``waitBriefly(releasingIn:)``:
/// the values the slot's copy borrows, the claim of the key's completion lane that the completion
/// holds until it has run, and the slot's word that says it is still running.
struct HandedCompletion<C: Completion>: Sendable {
    fileprivate let owned: Owned<C>
    fileprivate let claim: LaneExecutor<Lane, ClosureJob>.Claim
    fileprivate let posted: UInt

    /// Returns once the handler has run, or after ``CompletionHandoff/callerSpin``, whichever is
    /// first: the caller goes on either way, so a handler that blocks holds the caller for no
    /// longer than that. Ends the claim in `completions` when the handler has run by then; else the
    /// thread ends it after. Call it once.
    func waitBriefly(releasingIn completions: LaneExecutor<Lane, ClosureJob>) {
        CompletionHandoff.shared.waitBriefly(self, releasingIn: completions)
    }
}

/// What keeps the slot's bitwise copy of a completion valid: the completion itself when it fits in
/// the slot's line, else the box the slot refers to.
private enum Owned<C: Completion>: Sendable {
    case inline(C)
    case boxed(Box<C>)
}

/// A completion too large for the slot's line, which then carries a reference to this.
private final class Box<C: Completion>: Completion {
    let completion: C
    init(_ completion: C) { self.completion = completion }
    func run() { completion.runCopy() }
}

/// What a caller that stopped waiting leaves to the thread: the claim to end after the handler, and
/// (in its subclass) the completion's values to keep alive until then.
///
/// `@unchecked`: a class open to its one subclass cannot be checked; every stored property is a
/// `let` of a `Sendable` type.
private class Abandoned: @unchecked Sendable {
    let claim: LaneExecutor<Lane, ClosureJob>.Claim
    let completions: LaneExecutor<Lane, ClosureJob>
    /// The word the completion was posted with, which the box's address replaced.
    let posted: UInt
    init(claim: LaneExecutor<Lane, ClosureJob>.Claim, completions: LaneExecutor<Lane, ClosureJob>, posted: UInt) {
        self.claim = claim
        self.completions = completions
        self.posted = posted
    }
}

/// `@unchecked`: a subclass of an `@unchecked` class; its one stored property is `Sendable`.
private final class AbandonedCompletion<C: Completion>: Abandoned, @unchecked Sendable {
    /// Never read: it keeps what the slot's copy refers to alive until the thread drops the box.
    let owned: Owned<C>
    init(_ owned: Owned<C>, claim: LaneExecutor<Lane, ClosureJob>.Claim, completions: LaneExecutor<Lane, ClosureJob>, posted: UInt) {
        self.owned = owned
        super.init(claim: claim, completions: completions, posted: posted)
    }
}

/// Runs the completion of type `Self` whose bits are at `payload`, in place.
private extension Completion {
    static func run(at payload: UnsafeMutableRawPointer) {
        payload.assumingMemoryBound(to: Self.self).pointee.run()
    }
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
/// its completion has run (``HandedCompletion/waitBriefly(releasingIn:)``), so a caller that waits for it finds it done.
///
/// A hand-off round trip is cache lines crossing between two cores, a hundred or more nanoseconds
/// each on a virtual machine, and each line the thread reads only after the one before is a crossing
/// on the caller's wait. So the completion travels in the slot's own cache line: the word, the
/// completion's type and the completion's bits (its handler and result, 40 bytes at most; a larger
/// one goes in a box the line refers to). The thread's first fetch of the line brings all of it,
/// and no allocation is made for a hand-off. The word says whose the line is: free, claimed by a
/// caller writing the completion, posted (the thread runs it), or abandoned (its caller stopped
/// waiting and left a box with the claim). A sequence number in the word tells a waiting caller that
/// the thread is done with its completion even if another caller has posted one since.
///
/// The line holds a bitwise copy of the completion, which never releases anything: the caller keeps
/// the completion itself (``HandedCompletion``) until the thread is done with the copy, and then
/// releases its values on its own thread, where they were made (a reference count the thread
/// changed would have to cross back on the caller's next use). A caller that stops waiting moves
/// the completion into the box it leaves to the thread.
///
/// A caller that finds the thread asleep wakes it before its read (``wakeIfAsleep()``), so the
/// wake-up overlaps the read and the thread is polling when the completion comes. The completion
/// itself is handed over after the read, in one burst of writes to the line: handing it over
/// earlier (posted, then marked ready) writes the line twice across the read, and to a thread that
/// polls, the second write costs the caller one more crossing and saves none
/// (Docs/benchmarks/analysis.md, "The callback get, session 13"). A woken thread that gets nothing
/// (its caller descheduled mid-read) polls for ``threadSpin`` and sleeps again, as after any
/// completion. A hand-off notifies the thread's event only when the thread said it is going to
/// sleep, so a hand-off to a polling thread writes nothing but the slot's line.
///
/// `@unchecked`: the two lines are reached through a pointer, each word only through its atomic,
/// and the completion's type and bits are written only by the caller whose compare-exchange claimed
/// the slot, and read by the thread after the word says posted (release, then acquire).
final class CompletionHandoff: @unchecked Sendable {
    /// The process's one hand-off thread, started on first use; when idle it sleeps (no CPU).
    static let shared = CompletionHandoff()

    /// How long the thread keeps polling for the next hand-off after running one, in nanoseconds: a
    /// caller that waits for each completion and calls again (a loop of reads) is back well within
    /// it; then the thread sleeps.
    static let threadSpin: UInt64 = 50_000
    /// How long a caller waits for its handler to run, in nanoseconds: a handler on the spinning
    /// thread starts within about a microsecond; one that had to wake the thread may not make it.
    static let callerSpin: UInt64 = 20_000

    /// The largest completion carried in the slot's line; a larger one is boxed.
    static let inlineCapacity = lineSize - payloadOffset

    private static let lineSize = 64
    private static let typeOffset = MemoryLayout<UInt>.stride
    private static let payloadOffset = typeOffset + MemoryLayout<any Completion.Type>.stride

    /// The word's state, in its low bits; the bits above count hand-offs (or, when abandoned, are
    /// the address of the ``Abandoned`` box, which is 16-byte aligned).
    private static let stateMask: UInt = 0b111
    private static let free: UInt = 0
    private static let claimed: UInt = 1
    private static let posted: UInt = 2
    private static let abandoned: UInt = 4
    private static let sequenceStep: UInt = 8

    /// Two cache lines: the slot's (its word, the completion's type and bits), then ``asleep`` on
    /// its own, which the thread writes only around a sleep and every caller reads.
    private let memory: UnsafeMutableRawPointer
    private var word: UnsafeMutablePointer<Atomic<UInt>> { memory.assumingMemoryBound(to: Atomic<UInt>.self) }
    private var completionType: UnsafeMutableRawPointer { memory + Self.typeOffset }
    private var payload: UnsafeMutableRawPointer { memory + Self.payloadOffset }
    /// Whether the thread is asleep or about to sleep: set (sequentially consistent) before its last
    /// look at the slot, cleared when it wakes. A hand-off that sees it clear needs no notification.
    private var asleep: UnsafeMutablePointer<Atomic<Bool>> { (memory + Self.lineSize).assumingMemoryBound(to: Atomic<Bool>.self) }
    /// Notified on a hand-off the sleeping thread must see; the thread sleeps on it once it has spun.
    private let event = EventCount()

    private init() {
        memory = UnsafeMutableRawPointer.allocate(byteCount: 2 * Self.lineSize, alignment: Self.lineSize)
        memory.bindMemory(to: Atomic<UInt>.self, capacity: 1).initialize(to: Atomic(Self.free))
        (memory + Self.lineSize).bindMemory(to: Atomic<Bool>.self, capacity: 1).initialize(to: Atomic(false))
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff"
        thread.start()
    }

    /// Hands `completion`, which holds `claim`, to the thread if it is free; nil when it is busy with
    /// another (then nothing here runs `completion` or ends `claim`). After a hand-off the caller
    /// calls the result's ``HandedCompletion/waitBriefly(releasingIn:)``.
    func handOff<C: Completion>(_ completion: C, claim: LaneExecutor<Lane, ClosureJob>.Claim) -> HandedCompletion<C>? {
        let current = word.pointee.load(ordering: .relaxed)
        guard current & Self.stateMask == Self.free else { return nil }
        let sequence = current &+ Self.sequenceStep
        guard word.pointee.compareExchange(expected: current, desired: sequence | Self.claimed, ordering: .acquiring).exchanged else { return nil }
        let owned: Owned<C>
        if MemoryLayout<C>.size <= Self.inlineCapacity, MemoryLayout<C>.alignment <= MemoryLayout<UInt>.alignment {
            owned = .inline(completion)
            place(completion)
        } else {
            let box = Box(completion)
            owned = .boxed(box)
            place(box)
        }
        let posted = sequence | Self.posted
        word.pointee.store(posted, ordering: .sequentiallyConsistent)
        if asleep.pointee.load(ordering: .sequentiallyConsistent) { event.notifyAll() }
        return HandedCompletion(owned: owned, claim: claim, posted: posted)
    }

    /// Copies `completion`'s bits and type into the slot's line, without retaining anything: the
    /// caller's ``HandedCompletion`` owns the values the copy refers to.
    private func place<C: Completion>(_ completion: C) {
        completionType.initializeMemory(as: (any Completion.Type).self, repeating: C.self, count: 1)
        withUnsafeBytes(of: completion) { bytes in
            payload.bindMemory(to: C.self, capacity: 1)
            payload.copyMemory(from: bytes.baseAddress!, byteCount: MemoryLayout<C>.size)
        }
    }

    /// Wakes the thread if it is asleep, so that it is polling for the hand-off that follows the
    /// caller's read instead of waking after it. Costs a load when the thread is awake.
    func wakeIfAsleep() {
        if asleep.pointee.load(ordering: .relaxed) { event.notifyAll() }
    }

    /// Whether the thread is asleep (for tests that follow it).
    package var isAsleep: Bool { asleep.pointee.load(ordering: .relaxed) }

    /// ``HandedCompletion/waitBriefly(releasingIn:)``.
    fileprivate func waitBriefly<C: Completion>(_ handed: HandedCompletion<C>, releasingIn completions: LaneExecutor<Lane, ClosureJob>) {
        let posted = handed.posted
        if SpinWait.until(nanoseconds: Self.callerSpin, { word.pointee.load(ordering: .acquiring) != posted }) {
            return completions.release(handed.claim)
        }
        // The thread keeps the completion alive and ends the claim from here, unless it finished meanwhile.
        let left = Unmanaged.passRetained(AbandonedCompletion(handed.owned, claim: handed.claim, completions: completions, posted: posted) as Abandoned)
        let address = UInt(bitPattern: left.toOpaque())
        if word.pointee.compareExchange(expected: posted, desired: address | Self.abandoned, ordering: .acquiringAndReleasing).exchanged { return }
        left.release()
        completions.release(handed.claim)
    }

    private func loop() {
        while true {
            let current = word.pointee.load(ordering: .acquiring)
            if Self.isPending(current) {
                run(current)
                continue
            }
            if SpinWait.until(nanoseconds: Self.threadSpin, { Self.isPending(word.pointee.load(ordering: .relaxed)) }) { continue }
            // Said before the last look, and the key taken before it: a hand-off after that look
            // sees `asleep` and notifies, which changes the key, and the wait returns.
            asleep.pointee.store(true, ordering: .sequentiallyConsistent)
            let key = event.key
            if !Self.isPending(word.pointee.load(ordering: .sequentiallyConsistent)) { event.wait(key) }
            asleep.pointee.store(false, ordering: .relaxed)
        }
    }

    /// Whether `word` holds a completion to run: posted, or abandoned by a caller that stopped
    /// waiting before this thread got to it (a wake-up can take longer than the caller waits).
    private static func isPending(_ word: UInt) -> Bool {
        word & stateMask == posted || word & stateMask == abandoned
    }

    /// Runs the completion `current` says is pending, then frees the slot, ending the claim first
    /// when its caller left it.
    private func run(_ current: UInt) {
        let left: Abandoned? = current & Self.stateMask == Self.abandoned ? Self.abandonedBox(current) : nil
        let posted = left?.posted ?? current
        let type = completionType.load(as: (any Completion.Type).self)
        type.run(at: payload)
        let done = posted & ~Self.stateMask
        if left == nil, word.pointee.compareExchange(expected: posted, desired: done, ordering: .acquiringAndReleasing).exchanged { return }
        // Abandoned, before or while it ran: its caller left the claim and the completion's values to us.
        let abandoned = left ?? Self.abandonedBox(word.pointee.load(ordering: .acquiring))
        abandoned.completions.release(abandoned.claim)
        word.pointee.store(done, ordering: .releasing)
    }

    /// The box whose address an abandoned `word` holds, taking the reference its caller left.
    private static func abandonedBox(_ word: UInt) -> Abandoned {
        Unmanaged<Abandoned>.fromOpaque(UnsafeRawPointer(bitPattern: word & ~stateMask)!).takeRetainedValue()
    }
}
