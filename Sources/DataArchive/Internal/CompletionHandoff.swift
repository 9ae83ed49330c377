import ContentStore
import Foundation
import Synchronization

/// One thread that runs a completion handler handed to it while it is free, and stays awake for a
/// short while after each, so that the next hand-off costs a store to memory instead of a wake-up.
///
/// Owns: at most one handler runs here at a time, and a hand-off succeeds only while none does, so
/// a slow handler never holds up another key's (the caller then queues its handler on the
/// completion executor, as every other completion is). Handlers run on this thread, never on the
/// caller's stack.
///
/// Why: a callback `get` of a small value reads in a microsecond or two on the caller's thread, and
/// its completion must run elsewhere. Queued on a dispatch queue, the completion first wakes an idle
/// worker thread, and a caller waiting for it then sleeps until the completion wakes it: two
/// wake-ups, tens of microseconds each on a virtual machine, for a read that took one or two. Here
/// the thread is usually still spinning from the last hand-off, and the caller spins briefly until
/// its completion has run (``Handoff/waitBriefly()``), so a caller that waits for it finds it done.
final class CompletionHandoff: Sendable {
    /// A handler handed over, and whether it has run.
    final class Handoff: Sendable {
        fileprivate let handler: @Sendable () -> Void
        private let finished = Atomic<Bool>(false)

        fileprivate init(_ handler: @escaping @Sendable () -> Void) { self.handler = handler }

        fileprivate func run() {
            handler()
            finished.store(true, ordering: .releasing)
        }

        /// Returns once the handler has run, or after ``callerSpin``, whichever is first: the caller
        /// goes on either way, so a handler that blocks holds the caller for no longer than that.
        func waitBriefly() {
            _ = SpinWait.until(nanoseconds: CompletionHandoff.callerSpin) { finished.load(ordering: .acquiring) }
        }
    }

    /// The process's one hand-off thread, started on first use; when idle it sleeps (no CPU).
    static let shared = CompletionHandoff()

    /// How long the thread keeps polling for the next hand-off after running one, in nanoseconds: a
    /// caller that waits for each completion and calls again (a loop of reads) is back well within
    /// it; then the thread sleeps.
    static let threadSpin: UInt64 = 50_000
    /// How long a caller waits for its handler to run, in nanoseconds: a handler on the spinning
    /// thread starts within about a microsecond; one that had to wake the thread may not make it.
    static let callerSpin: UInt64 = 20_000

    /// Whether a handler is handed over and has not finished (the slot is taken).
    private let busy = Atomic<Bool>(false)
    private let slot = Mutex<Handoff?>(nil)
    /// Notified on every hand-off; the thread sleeps on it once it has spun.
    private let posted = EventCount()

    private init() {
        let thread = Thread { [self] in loop() }
        thread.name = "DataArchive.completion-handoff"
        thread.start()
    }

    /// Hands `handler` to the thread if it is free; returns the hand-off, or nil when the thread is
    /// busy with another handler (then `handler` is not run here).
    func handOff(_ handler: @escaping @Sendable () -> Void) -> Handoff? {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return nil }
        let handoff = Handoff(handler)
        slot.withLock { $0 = handoff }
        posted.notifyAll()
        return handoff
    }

    private func loop() {
        while true {
            let key = posted.key
            if let handoff = slot.withLock({ slot in defer { slot = nil }; return slot }) {
                handoff.run()
                busy.store(false, ordering: .releasing)
                continue
            }
            if SpinWait.until(nanoseconds: Self.threadSpin, { posted.key != key }) { continue }
            posted.wait(key)
        }
    }
}
