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

/// The hand-off threads behind prompt callback reads, alone and under a DataArchive.
///
/// The tests of the threads themselves use instances of their own (one or two threads; their threads
/// live on, asleep, as the shared ones do), so other tests' hand-offs cannot take them.
@Suite struct CompletionHandoffTests {
    let directory = TemporaryDirectory()
    let completions = LaneExecutor<Lane, ClosureJob>(label: "CompletionHandoffTests", width: 2)

    /// Hands `handler` to `handoff` as a job holding a claim on a lane of its own (recorded in
    /// `lanes`); nil when refused (the claim is then ended here).
    private func handOff(_ handler: @escaping @Sendable () -> Void, to handoff: CompletionHandoff, lanes: LaneLog? = nil) -> CompletionHandoff.Ticket? {
        let lane = Lane.newReader()
        let claim = completions.claimIfIdle(lane)!
        let ticket = handoff.handOff(.init(handler: handler, completions: completions, claim: claim))
        if ticket == nil { completions.release(claim) } else { lanes?.lanes.withLock { $0.append(lane) } }
        return ticket
    }

    /// Whether every lane in `lanes` is idle again: each job's claim was ended once its handler ran.
    private func allIdle(_ lanes: LaneLog) -> Bool {
        lanes.lanes.withLock { lanes in
            lanes.allSatisfy { lane in
                guard let claim = completions.claimIfIdle(lane) else { return false }
                completions.release(claim)
                return true
            }
        }
    }

    /// Hands `handler` over, retrying while every thread is busy.
    private func handOffWhenFree(_ handler: @escaping @Sendable () -> Void, to handoff: CompletionHandoff, lanes: LaneLog? = nil) -> CompletionHandoff.Ticket {
        while true {
            if let ticket = handOff(handler, to: handoff, lanes: lanes) { return ticket }
            usleep(100)
        }
    }

    /// Threads hand over handlers as fast as they can to one thread: each one accepted runs exactly
    /// once, on another thread than its caller, never two at once, and its lane claim ends (by the
    /// caller or by the thread, whichever saw the other done); each refused one is not run.
    @Test func handedHandlersRunOnceOffTheCallersThreadOneAtATime() async {
        let handoff = CompletionHandoff(threads: 1)
        let threads = 8, attempts = 2_000
        let accepted = Atomic<Int>(0), ran = Atomic<Int>(0), running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false), onCaller = Atomic<Bool>(false)
        let lanes = LaneLog()
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            let caller = pthread_self()
            for _ in 0 ..< attempts {
                let ticket = handOff({
                    if running.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                    if pthread_equal(pthread_self(), caller) != 0 { onCaller.store(true, ordering: .relaxed) }
                    ran.add(1, ordering: .relaxed)
                    running.subtract(1, ordering: .sequentiallyConsistent)
                }, to: handoff, lanes: lanes)
                if let ticket {
                    accepted.add(1, ordering: .relaxed)
                    handoff.waitBriefly(ticket)
                }
            }
        }
        // The last one may still be running: a final hand-off of our own runs after it.
        let drained = DispatchSemaphore(value: 0)
        handoff.waitBriefly(handOffWhenFree({ drained.signal() }, to: handoff, lanes: lanes))
        drained.wait()
        // The thread ends an abandoned job's claim just after its handler; give the last one time.
        for _ in 0 ..< 5_000 where !allIdle(lanes) { usleep(1_000) }
        #expect(allIdle(lanes))
        let acceptedCount = accepted.load(ordering: .relaxed), ranCount = ran.load(ordering: .relaxed)
        #expect(acceptedCount > 0)
        #expect(ranCount == acceptedCount)
        let didOverlap = overlapped.load(ordering: .relaxed), ranOnCaller = onCaller.load(ordering: .relaxed)
        #expect(!didOverlap)
        #expect(!ranOnCaller)
    }

    /// While a handler runs, its thread refuses the next (its caller queues it elsewhere), and a
    /// caller waiting for a blocked handler gives up after a bounded spin instead of waiting for it.
    @Test func aBusyThreadRefusesAndABlockedHandlerDoesNotHoldItsCaller() {
        let handoff = CompletionHandoff(threads: 1)
        let release = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        let ticket = handOffWhenFree({
            started.signal()
            release.wait()
            finished.signal()
        }, to: handoff)
        started.wait()
        #expect(handOff({}, to: handoff) == nil)
        handoff.waitBriefly(ticket)                             // returns: the handler is still blocked
        release.signal()
        finished.wait()
        let next = DispatchSemaphore(value: 0)
        handoff.waitBriefly(handOffWhenFree({ next.signal() }, to: handoff))
        next.wait()
    }

    /// With a thread per core, a handler blocked on one thread does not send a second caller to the
    /// queue: the next thread takes its handler and runs it meanwhile.
    @Test func aSecondCallerGetsTheNextThread() {
        let handoff = CompletionHandoff(threads: 2)
        let release = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0)
        let first = handOffWhenFree({
            started.signal()
            release.wait()
        }, to: handoff)
        started.wait()
        let second = DispatchSemaphore(value: 0)
        let ticket = handOff({ second.signal() }, to: handoff)
        #expect(ticket != nil)
        if let ticket {
            second.wait()                                       // runs while the first is still blocked
            handoff.waitBriefly(ticket)
        }
        handoff.waitBriefly(first)
        release.signal()
    }

    /// A thread that has gone to sleep still runs what it is handed, and the caller, which does not
    /// wait for a sleeping thread, gets its completion all the same.
    @Test func aSleepingThreadIsWokenForItsJob() {
        let handoff = CompletionHandoff(threads: 1)
        for _ in 0 ..< 3 {
            usleep(UInt32(CompletionHandoff.probeSpin / 1000) * 3)  // well past its polling: asleep
            let ran = DispatchSemaphore(value: 0)
            let ticket = handOffWhenFree({ ran.signal() }, to: handoff)
            handoff.waitBriefly(ticket)
            ran.wait()
        }
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

    /// Many more callers than hand-off threads, each on its own key, reading (some waiting for each
    /// completion, some not) between writes: per key the completions arrive in call order, none on
    /// its caller's thread, and every get sees the writes called before it.
    @Test(arguments: [16, 32])
    func manyCallersKeepEachKeysOrder(callers: Int) async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let operations = 300
        let order = Mutex<[Int: [Int]]>([:])
        let failures = Mutex<[String]>([])
        let done = Countdown(callers * operations)
        DispatchQueue.concurrentPerform(iterations: callers) { caller in
            let thread = pthread_self()
            let key = "many-\(caller)"
            @Sendable func completed(_ step: Int, _ failure: String?) {
                if pthread_equal(pthread_self(), thread) != 0 { failures.withLock { $0.append("\(key) step \(step) ran on its caller") } }
                if let failure { failures.withLock { $0.append("\(key) step \(step): \(failure)") } }
                order.withLock { $0[caller, default: []].append(step) }
                done.tick()
            }
            var written = -1
            for step in 0 ..< operations {
                if step % 10 == 0 {
                    written = step
                    archive.set(key: key, data: bytes("\(step)")) { completed(step, $0.isSuccess ? nil : "\($0)") }
                    continue
                }
                let expected = written
                let answered = DispatchSemaphore(value: 0)
                archive.get(key: key) { data, result in
                    completed(step, result.isSuccess && text(data) == "\(expected)" ? nil : "get saw \(text(data) ?? "nil"), expected \(expected)")
                    answered.signal()
                }
                // Odd callers wait for each completion (a read loop); even ones go straight on.
                if caller % 2 == 1 { answered.wait() }
            }
        }
        await done.wait()
        #expect(failures.withLock { Array($0.prefix(5)) } == [])
        #expect(order.withLock { $0.count == callers && $0.values.allSatisfy { $0 == Array(0 ..< operations) } })
    }

    /// Callers sharing two keys: one key's completions never run two at once, whichever threads they
    /// run on (hand-off threads or the completion executor), and none runs on its caller's thread.
    @Test func oneKeysCompletionsNeverOverlapAcrossHandoffThreads() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        for key in ["shared-0", "shared-1"] { #expect(await archive.setAndWait(key, bytes(key)).isSuccess) }
        let callers = 8, reads = 500
        let running = RunningCounts()
        let overlapped = Atomic<Bool>(false), onCaller = Atomic<Bool>(false), wrong = Atomic<Int>(0)
        let done = Countdown(callers * reads)
        DispatchQueue.concurrentPerform(iterations: callers) { caller in
            let thread = pthread_self()
            for read in 0 ..< reads {
                let index = (caller + read) % 2
                archive.get(key: "shared-\(index)") { data, result in
                    if running.enter(index) > 1 { overlapped.store(true, ordering: .relaxed) }
                    if pthread_equal(pthread_self(), thread) != 0 { onCaller.store(true, ordering: .relaxed) }
                    if !result.isSuccess || text(data) != "shared-\(index)" { wrong.add(1, ordering: .relaxed) }
                    running.leave(index)
                    done.tick()
                }
            }
        }
        await done.wait()
        let didOverlap = overlapped.load(ordering: .relaxed), ranOnCaller = onCaller.load(ordering: .relaxed)
        let wrongCount = wrong.load(ordering: .relaxed)
        #expect(!didOverlap)
        #expect(!ranOnCaller)
        #expect(wrongCount == 0)
    }
}

/// How many completions of each of two keys are running.
private final class RunningCounts: Sendable {
    private let counts = Mutex([0, 0])
    /// Counts one more running for `index`; returns how many now are.
    func enter(_ index: Int) -> Int { counts.withLock { $0[index] += 1; return $0[index] } }
    func leave(_ index: Int) { counts.withLock { $0[index] -= 1 } }
}

/// The lanes of the jobs a test handed over.
private final class LaneLog: Sendable {
    let lanes = Mutex<[Lane]>([])
}
