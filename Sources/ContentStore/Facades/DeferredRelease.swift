import Foundation
import Synchronization

/// Lets go of values a writer replaced on a thread of its own, so that a commit does not pay for
/// tearing down what it replaced (a large state's previous version: its array's thousand entries,
/// each entry's strings released one by one). Readers are not involved: a value is handed over only
/// once nothing published refers to it.
///
/// Invariant owned here: a value handed over is released soon, by the releaser thread, and at most
/// ``limit`` values wait: when that many already do, the caller releases its value itself, so a
/// writer faster than the releaser slows down to it rather than growing memory. The thread starts
/// on demand and ends after ``idleTimeout`` without work.
package final class DeferredRelease: Sendable {
    /// The process's releaser, shared by the facades.
    package static let shared = DeferredRelease(limit: 64)

    /// Values waiting at most; beyond it the caller releases its own.
    package let limit: Int
    /// The thread ends after this long without work (nanoseconds).
    static let idleTimeout: Int64 = 2_000_000_000

    private struct State {
        var queue: [any Sendable] = []
        var running = false
        /// The thread waits (or is about to) for a notification.
        var sleeping = false
    }

    private let state = Mutex(State())
    private let event = EventCount()

    package init(limit: Int) {
        self.limit = limit
    }

    /// Hands `value` over to be released on the releaser thread, or releases it now when
    /// ``limit`` values wait already.
    package func release(_ value: consuming some Sendable) {
        var value: (any Sendable)? = value
        let (start, wake) = state.withLock { state -> (start: Bool, wake: Bool) in
            guard state.queue.count < limit, let taken = value.take() else { return (false, false) }
            state.queue.append(taken)
            if !state.running {
                state.running = true
                return (true, false)
            }
            defer { state.sleeping = false }
            return (false, state.sleeping)
        }
        // When the queue was full, `value` still holds the value: released here, at the end.
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "ContentStore.DeferredRelease"
            thread.start()
        } else if wake {
            event.notifyAll()
        }
    }

    private func run() {
        var idleSince: ContinuousClock.Instant?
        while true {
            let key = event.key
            let batch = state.withLock { state -> [any Sendable] in
                if state.queue.isEmpty { state.sleeping = true }
                defer { state.queue = [] }
                return state.queue
            }
            guard batch.isEmpty else {
                idleSince = nil
                continue  // `batch` is released here, off the writers' path
            }
            let now = ContinuousClock.now
            if let idleSince, now - idleSince >= .nanoseconds(Self.idleTimeout) {
                let ended = state.withLock { state in
                    guard state.queue.isEmpty else { return false }
                    state.running = false
                    state.sleeping = false
                    return true
                }
                if ended { return }
                continue
            }
            if idleSince == nil { idleSince = now }
            event.wait(key, timeoutNanoseconds: Self.idleTimeout)
        }
    }
}
