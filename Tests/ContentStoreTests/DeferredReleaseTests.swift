import Foundation
import Synchronization
import Testing
@testable import ContentStore

@Suite struct DeferredReleaseTests {
    /// Records the thread it is freed on.
    final class Tracked: Sendable {
        let box: Box
        init(_ box: Box) { self.box = box }
        deinit { box.freed.withLock { $0.append(pthread_self()) } }
    }

    final class Box: Sendable {
        /// The threads instances were freed on.
        let freed = Mutex<[pthread_t]>([])
    }

    final class Gate: Sendable {
        let state = Mutex((entered: false, open: false))
    }

    /// Frees itself only once its gate opens.
    final class Blocker: Sendable {
        let gate: Gate
        init(_ gate: Gate) { self.gate = gate }
        deinit {
            gate.state.withLock { $0.entered = true }
            while !gate.state.withLock({ $0.open }) { usleep(1_000) }
        }
    }

    /// Values handed over are freed on the releaser's thread, not the caller's; once `limit` wait,
    /// the caller frees its own at once (the queue is bounded), and everything is freed in the end.
    @Test func valuesAreFreedOnTheReleaserThreadAndTheQueueIsBounded() async throws {
        let box = Box()
        let releaser = DeferredRelease(limit: 4)
        var caller = pthread_self()
        for _ in 0 ..< 3 { releaser.release(Tracked(box)) }
        try await waitUntil { box.freed.withLock { $0.count } == 3 }
        #expect(box.freed.withLock { $0 }.allSatisfy { $0 != caller })

        // Hold the releaser's thread inside a deinit so the queue fills up behind it.
        let gate = Gate()
        releaser.release(Blocker(gate))
        try await waitUntil { gate.state.withLock { $0.entered } }
        box.freed.withLock { $0.removeAll() }
        caller = pthread_self()
        for _ in 0 ..< 6 { releaser.release(Tracked(box)) }
        // Four waited; the two beyond the limit were freed by the caller, at once.
        #expect(box.freed.withLock { $0 } == [caller, caller])
        gate.state.withLock { $0.open = true }
        try await waitUntil { box.freed.withLock { $0.count } == 6 }
        #expect(box.freed.withLock { $0.filter { $0 != caller }.count } == 4)
    }

    private func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(300)  // bounds only a failing run
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out"); return }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
