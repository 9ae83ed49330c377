@testable import DataArchive
import Dispatch
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The hand-off thread behind prompt callback reads, alone and under a DataArchive.
@Suite struct CompletionHandoffTests {
    let directory = TemporaryDirectory()

    /// Hands `handler` over, retrying while the shared thread is busy with another test's handler.
    private func handOffWhenFree(_ handler: @escaping @Sendable () -> Void) -> CompletionHandoff.Handoff {
        while true {
            if let handoff = CompletionHandoff.shared.handOff(handler) { return handoff }
            usleep(100)
        }
    }

    /// Threads hand over handlers as fast as they can: each one accepted runs exactly once, on
    /// another thread than its caller, never two at once; each refused one is not run.
    @Test func handedHandlersRunOnceOffTheCallersThreadOneAtATime() async {
        let threads = 8, attempts = 2_000
        let accepted = Atomic<Int>(0), ran = Atomic<Int>(0), running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false), onCaller = Atomic<Bool>(false)
        let handoffs = Mutex<[CompletionHandoff.Handoff]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            let caller = pthread_self()
            let handler: @Sendable () -> Void = {
                if running.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                if pthread_equal(pthread_self(), caller) != 0 { onCaller.store(true, ordering: .relaxed) }
                ran.add(1, ordering: .relaxed)
                running.subtract(1, ordering: .sequentiallyConsistent)
            }
            var acceptedHere = 0
            for _ in 0 ..< attempts {
                if let handoff = CompletionHandoff.shared.handOff(handler) {
                    acceptedHere += 1
                    handoff.waitBriefly()
                    handoffs.withLock { $0.append(handoff) }
                }
            }
            // Under load the thread can be busy for every attempt (another test's handler, or this
            // test's descheduled); one accepted hand-off per caller keeps the checks below from
            // holding vacuously.
            if acceptedHere == 0 {
                let handoff = handOffWhenFree(handler)
                acceptedHere += 1
                handoff.waitBriefly()
                handoffs.withLock { $0.append(handoff) }
            }
            accepted.add(acceptedHere, ordering: .relaxed)
        }
        // The last one may still be running: a final hand-off of our own runs after it.
        let drained = DispatchSemaphore(value: 0)
        _ = handOffWhenFree { drained.signal() }
        drained.wait()
        let acceptedCount = accepted.load(ordering: .relaxed), ranCount = ran.load(ordering: .relaxed)
        #expect(acceptedCount >= threads)
        #expect(ranCount == acceptedCount)
        let didOverlap = overlapped.load(ordering: .relaxed), ranOnCaller = onCaller.load(ordering: .relaxed)
        #expect(!didOverlap)
        #expect(!ranOnCaller)
    }

    /// While a handler runs, the thread refuses the next (its caller queues it elsewhere), and a
    /// caller waiting for a blocked handler gives up after a bounded spin instead of waiting for it.
    @Test func aBusyThreadRefusesAndABlockedHandlerDoesNotHoldItsCaller() {
        let release = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        let handoff = handOffWhenFree {
            started.signal()
            release.wait()
            finished.signal()
        }
        started.wait()
        #expect(CompletionHandoff.shared.handOff {} == nil)
        handoff.waitBriefly()                                   // returns: the handler is still blocked
        release.signal()
        finished.wait()
        let next = DispatchSemaphore(value: 0)
        _ = handOffWhenFree { next.signal() }
        next.wait()
    }

    /// Callback gets of idle keys (handed off when the thread is free) interleaved with queued
    /// writes, from several threads on their own keys: every key's completions arrive in call
    /// order, none on its caller's thread, and every get sees the writes called before it.
    @Test func callbackGetsKeepCallOrderWithWritesAroundThem() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let threads = 4, operations = 600
        let order = Mutex<[Int: [Int]]>([:])
        let failures = Mutex<[String]>([])
        let done = Countdown(threads * operations)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let caller = pthread_self()
            let key = "k\(thread)"
            @Sendable func completed(_ step: Int, _ failure: String?) {
                if pthread_equal(pthread_self(), caller) != 0 { failures.withLock { $0.append("\(key) step \(step) ran on its caller") } }
                if let failure { failures.withLock { $0.append("\(key) step \(step): \(failure)") } }
                order.withLock { $0[thread, default: []].append(step) }
                done.tick()
            }
            var written = -1
            for step in 0 ..< operations {
                if step % 5 == 0 {
                    written = step
                    archive.set(key: key, data: bytes("\(step)")) { completed(step, $0.isSuccess ? nil : "\($0)") }
                } else {
                    let expected = written
                    archive.get(key: key) { data, result in
                        completed(step, result.isSuccess && text(data) == "\(expected)" ? nil : "get saw \(text(data) ?? "nil"), expected \(expected)")
                    }
                    // Every other get waits for its completion, as a caller of a read loop does.
                    if step % 2 == 0 { usleep(50) }
                }
            }
        }
        await done.wait()
        #expect(failures.withLock { Array($0.prefix(5)) } == [])
        #expect(order.withLock { $0.values.allSatisfy { $0 == Array(0 ..< operations) } })
    }
}
