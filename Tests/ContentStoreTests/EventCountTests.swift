import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// The event count committers sleep on. Linux runs the futex path; `make test` stresses the
/// condition-variable path other platforms use (Tests/Portability), and these tests run on it with
/// `swift test -Xcc -DCS_EVENT_CONDVAR --filter EventCountTests`.
/// A lost wake-up leaves a waiter asleep, so each test waits for its threads with a deadline, then
/// notifies once more to let any stuck waiter go before failing.
@Suite(.blocking) struct EventCountTests {
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Starts `body` on `count` threads; the group is left when each returns.
    private func startThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> DispatchGroup {
        let group = DispatchGroup()
        for index in 0 ..< count {
            group.enter()
            Thread {
                body(index)
                group.leave()
            }.start()
        }
        return group
    }

    /// Whether every thread of `group` returned within `seconds`; if not, a last notification lets
    /// any waiter still asleep go (the test fails either way).
    private func finished(_ group: DispatchGroup, within seconds: Double, releasing event: EventCount) -> Bool {
        let finished = group.wait(timeout: .now() + seconds) == .success
        if !finished { event.notifyAll() }
        return finished
    }

    /// Waiters that take the key, check a counter, then wait, see every value a notifier sets.
    @Test func everyNotificationReachesEveryWaiter() {
        let event = EventCount()
        let counter = Counter()
        let notifications = 20_000
        let waiters = startThreads(4) { _ in
            for wanted in 1 ... notifications {
                while true {
                    let key = event.key
                    if counter.value.load(ordering: .sequentiallyConsistent) >= wanted { break }
                    event.wait(key)
                }
            }
        }
        for value in 1 ... notifications {
            counter.value.store(value, ordering: .sequentiallyConsistent)
            event.notifyAll()
            if value % 64 == 0 { sched_yield() }
        }
        #expect(finished(waiters, within: 300, releasing: event))
    }

    /// A notification between taking the key and waiting makes the wait return instead of sleeping.
    @Test func aWaitWithAStaleKeyReturns() {
        let event = EventCount()
        let key = event.key
        event.notifyAll()
        let waiter = startThreads(1) { _ in event.wait(key) }
        #expect(finished(waiter, within: 300, releasing: event))
    }

    /// A timed wait that nobody notifies returns once its time is up.
    @Test func aTimedWaitReturnsUnnotified() {
        let event = EventCount()
        let waiter = startThreads(1) { _ in event.wait(event.key, timeoutNanoseconds: 5_000_000) }
        #expect(finished(waiter, within: 300, releasing: event))
    }
}
