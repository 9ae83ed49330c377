@testable import DataArchive
import Dispatch
import Foundation
import Synchronization
import Testing
import TestThreads

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A completion that runs `body`.
private struct TestCompletion: Completion {
    let body: @Sendable () -> Void
    func run() { body() }
}

/// Four words, a completion's payload that fits in the slot's line beside a handler.
private struct Words: Sendable {
    var a, b, c, d: UInt32
}

/// Words and two more, which with a handler does not fit.
private struct LargeWords: Sendable {
    var words: Words
    var e, f: UInt64
}

/// Hands its words to its handler.
private struct WordsCompletion<W: Sendable>: Completion {
    let words: W
    let handler: @Sendable (W) -> Void
    func run() { handler(words) }
}

/// A count shared between threads.
private final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

/// Counts its deinitializations in `deinits`.
private final class Tracked: Sendable {
    private let deinits: Counter
    init(_ deinits: Counter) { self.deinits = deinits }
    deinit { deinits.value.add(1, ordering: .sequentiallyConsistent) }
}

/// The threads running a caller's loop of archive calls. Between its calls a loop runs only its own
/// code, so a completion that runs on one of these threads ran inside one of the loop's calls: on a
/// caller's stack, which the contract forbids. A loop's thread is a dispatch worker, so once its loop
/// is over it may run jobs the completion executor queued, which is no caller's stack: comparing
/// with the caller's thread alone would count those (it did, under ThreadSanitizer's slowdown).
private final class CallingThreads: Sendable {
    private let threads = Mutex<Set<Int>>([])

    /// Runs `loop` with the calling thread counted as calling.
    func calling(_ loop: () -> Void) {
        let thread = Int(bitPattern: pthread_self())
        threads.withLock { _ = $0.insert(thread) }
        defer { threads.withLock { _ = $0.remove(thread) } }
        loop()
    }

    /// Whether the current thread is inside a caller's loop of calls.
    var currentThreadIsCalling: Bool { threads.withLock { $0.contains(Int(bitPattern: pthread_self())) } }
}

/// The hand-off thread behind prompt callback reads, alone and under a DataArchive.
///
/// `.blocking`: every test is a caller that blocks its thread (a bounded spin in `waitBriefly`,
/// `concurrentPerform` loops of calls, semaphores), which on the cooperative pool held a thread the
/// pool tests and the async tests needed.
@Suite(.blocking) struct CompletionHandoffTests {
    let directory = TemporaryDirectory()
    let executor = LaneExecutor<Lane, ClosureJob>(label: "CompletionHandoffTests", width: 2)

    /// Hands `body` over on a new lane, retrying while the shared thread is busy with another
    /// test's completion (each refused one ends its claim, as a caller falling back to the queue does).
    private func handOffWhenFree<C: Completion>(_ completion: C) -> (HandedCompletion<C>, Lane) {
        while true {
            let lane = Lane.newReader()
            let claim = executor.claimIfIdle(lane)!
            if let handed = CompletionHandoff.shared.handOff(completion, claim: claim) { return (handed, lane) }
            executor.release(claim)
            usleep(100)
        }
    }

    private func handOffWhenFree(_ body: @escaping @Sendable () -> Void) -> (HandedCompletion<TestCompletion>, Lane) {
        handOffWhenFree(TestCompletion(body: body))
    }

    /// Waits for `handed` briefly, ending its claim in this suite's executor.
    private func waitBriefly<C: Completion>(_ handed: HandedCompletion<C>) {
        handed.waitBriefly(releasingIn: executor)
    }

    /// A caller that finds the thread asleep wakes it before its read. Woken with nothing to run
    /// (its caller descheduled mid-read), the thread polls for a bounded time and sleeps again; a
    /// completion handed over after such a wake runs once, off the caller's thread, and its claim
    /// ends.
    @Test func aThreadWokenBeforeAReadPollsBoundedlyThenRunsTheCompletionOnce() {
        /// Polls `condition` every millisecond for up to 5 s (the thread may wait for a core).
        func eventually(_ condition: () -> Bool) -> Bool {
            for _ in 0 ..< 5_000 where !condition() { usleep(1_000) }
            return condition()
        }
        let handoff = CompletionHandoff.shared
        // Other suites' completions keep it awake at times; it sleeps once they leave it idle.
        #expect(eventually { handoff.isAsleep })
        // Nothing comes after the wake (a read descheduled for far longer than the thread polls): it
        // sleeps again. Its ~50 µs awake is not sampled: a poll that sleeps between looks misses it,
        // and one that spins keeps the woken thread from a core on a loaded two-core machine.
        handoff.wakeIfAsleep()
        #expect(eventually { handoff.isAsleep })
        let ran = Atomic<Int>(0), caller = pthread_self(), onCaller = Atomic<Bool>(false)
        handoff.wakeIfAsleep()
        let (completion, lane) = handOffWhenFree {
            if pthread_equal(pthread_self(), caller) != 0 { onCaller.store(true, ordering: .relaxed) }
            ran.add(1, ordering: .sequentiallyConsistent)
        }
        waitBriefly(completion)
        #expect(eventually { ran.load(ordering: .sequentiallyConsistent) == 1 })
        executor.waitUntilFinished(through: executor.lastTicket)
        usleep(2_000)
        #expect(ran.load(ordering: .sequentiallyConsistent) == 1)
        let ranOnCaller = onCaller.load(ordering: .relaxed)
        #expect(!ranOnCaller)
        #expect(executor.claimIfIdle(lane) != nil)
    }

    /// Threads hand over completions as fast as they can: each one accepted runs exactly once, on
    /// another thread than its caller, never two at once, and its lane claim ends once it has run
    /// (the lane is idle again); each refused one is not run.
    @Test func handedCompletionsRunOnceOffTheCallersThreadOneAtATime() async {
        let threads = 8, attempts = 2_000
        let accepted = Atomic<Int>(0), ran = Atomic<Int>(0), running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false), onCaller = Atomic<Bool>(false)
        let lanes = Mutex<[Lane]>([])
        let executor = executor
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            let caller = pthread_self()
            let body: @Sendable () -> Void = {
                if running.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                if pthread_equal(pthread_self(), caller) != 0 { onCaller.store(true, ordering: .relaxed) }
                ran.add(1, ordering: .relaxed)
                running.subtract(1, ordering: .sequentiallyConsistent)
            }
            var acceptedHere = 0
            for _ in 0 ..< attempts {
                let lane = Lane.newReader()
                let claim = executor.claimIfIdle(lane)!
                if let handed = CompletionHandoff.shared.handOff(TestCompletion(body: body), claim: claim) {
                    acceptedHere += 1
                    handed.waitBriefly(releasingIn: executor)
                    lanes.withLock { $0.append(lane) }
                } else {
                    executor.release(claim)
                }
            }
            // Under load the thread can be busy for every attempt (another test's handler, or this
            // test's descheduled); one accepted hand-off per caller keeps the checks below from
            // holding vacuously.
            if acceptedHere == 0 {
                let (completion, lane) = handOffWhenFree(body)
                acceptedHere += 1
                completion.waitBriefly(releasingIn: executor)
                lanes.withLock { $0.append(lane) }
            }
            accepted.add(acceptedHere, ordering: .relaxed)
        }
        // The last one may still be running: a final hand-off of our own runs after it.
        let drained = DispatchSemaphore(value: 0)
        let (last, _) = handOffWhenFree { drained.signal() }
        drained.wait()
        waitBriefly(last)
        let acceptedCount = accepted.load(ordering: .relaxed), ranCount = ran.load(ordering: .relaxed)
        #expect(acceptedCount >= threads)
        #expect(ranCount == acceptedCount)
        let didOverlap = overlapped.load(ordering: .relaxed), ranOnCaller = onCaller.load(ordering: .relaxed)
        #expect(!didOverlap)
        #expect(!ranOnCaller)
        // Every claim ended (a claim's end would crash if it ran twice): each lane can be claimed again.
        let idle = lanes.withLock { $0.allSatisfy { executor.claimIfIdle($0) != nil } }
        #expect(idle)
    }

    /// While a handler runs, the thread refuses the next (its caller queues it elsewhere); a caller
    /// waiting for a blocked handler gives up after a bounded spin instead of waiting for it, and
    /// then the thread ends the claim once the handler has run: a job queued on the lane
    /// meanwhile runs after the handler, not before.
    @Test func aBlockedHandlerDoesNotHoldItsCallerAndStillHoldsItsLane() {
        let release = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0), queued = DispatchSemaphore(value: 0)
        let order = Mutex<[String]>([])
        let (blocked, lane) = handOffWhenFree {
            started.signal()
            release.wait()
            order.withLock { $0.append("handler") }
        }
        started.wait()
        let refusedClaim = executor.claimIfIdle(Lane.newReader())!
        #expect(CompletionHandoff.shared.handOff(TestCompletion(body: {}), claim: refusedClaim) == nil)
        executor.release(refusedClaim)
        waitBriefly(blocked)           // returns: the handler is still blocked
        executor.submit(lane) {
            order.withLock { $0.append("queued") }
            queued.signal()
        }
        usleep(2_000)
        #expect(order.withLock { $0 } == [])
        release.signal()
        queued.wait()
        #expect(order.withLock { $0 } == ["handler", "queued"])
        executor.waitUntilFinished(through: executor.lastTicket)
        #expect(executor.claimIfIdle(lane) != nil)
    }

    /// A caller that saw its handler run ends the claim itself: the lane is idle when
    /// `waitBriefly` returns.
    @Test func aCallerThatSawItsHandlerRunEndsTheClaim() {
        let ran = Atomic<Bool>(false)
        let (completion, lane) = handOffWhenFree { ran.store(true, ordering: .releasing) }
        waitBriefly(completion)
        // The handler ran within the caller's spin unless the thread was descheduled for all of
        // it; either way exactly one side ends the claim, and once the handler ran the lane is idle.
        while !ran.load(ordering: .acquiring) { usleep(100) }
        executor.waitUntilFinished(through: executor.lastTicket)
        #expect(executor.claimIfIdle(lane) != nil)
    }

    /// A caller can stop waiting before the thread has even woken (a wake-up takes longer than
    /// the caller's spin on a loaded machine): its completion still runs, once, and its claim ends.
    /// Each round hands a completion to the thread asleep, which is when that happens.
    @Test func aCompletionAbandonedBeforeTheThreadWokeStillRuns() {
        let handoff = CompletionHandoff.shared
        for _ in 0 ..< 20 {
            for _ in 0 ..< 5_000 where !handoff.isAsleep { usleep(1_000) }
            let ran = DispatchSemaphore(value: 0)
            let (handed, lane) = handOffWhenFree { ran.signal() }
            waitBriefly(handed)
            #expect(ran.wait(timeout: .now() + 5) == .success)
            // The thread may end the claim just after the handler signalled. A claim taken to look
            // is given back, so that the next round's lanes are all this test has claimed.
            var idle = false
            for _ in 0 ..< 5_000 where !idle {
                if let claim = executor.claimIfIdle(lane) {
                    executor.release(claim)
                    idle = true
                } else {
                    usleep(1_000)
                }
            }
            #expect(idle)
        }
    }

    /// A completion travels in the slot's cache line when it fits and in a box when it does not;
    /// either way the handler sees every byte its caller gave it.
    @Test func aCompletionArrivesWholeInTheSlotsLineOrInABox() {
        let fits = Words(a: 0x0101_0101, b: 0x0202_0202, c: 0x0303_0303, d: 0x0404_0404)
        let large = LargeWords(words: fits, e: 0x0505_0505, f: 0x0606_0606)
        #expect(MemoryLayout<WordsCompletion<Words>>.size <= CompletionHandoff.inlineCapacity)
        #expect(MemoryLayout<WordsCompletion<LargeWords>>.size > CompletionHandoff.inlineCapacity)
        let seen = Mutex<[String]>([])
        let (small, _) = handOffWhenFree(WordsCompletion(words: fits) { words in seen.withLock { $0.append("\(words)") } })
        waitBriefly(small)
        let (boxed, _) = handOffWhenFree(WordsCompletion(words: large) { words in seen.withLock { $0.append("\(words)") } })
        waitBriefly(boxed)
        executor.waitUntilFinished(through: executor.lastTicket)
        #expect(seen.withLock { $0 } == ["\(fits)", "\(large)"])
    }

    /// The slot's copy of a completion never owns what it refers to: what a handler captured is
    /// released exactly once, by the caller once it saw the handler run, or by the thread after a
    /// handler that outlasted the caller's wait.
    @Test func whatACompletionCarriesIsReleasedOnceOnBothPaths() {
        let deinits = Counter()
        weak var waited: Tracked?
        do {
            let tracked = Tracked(deinits)
            waited = tracked
            let (handed, _) = handOffWhenFree { withExtendedLifetime(tracked) {} }
            waitBriefly(handed)
        }
        executor.waitUntilFinished(through: executor.lastTicket)
        // Released by the caller, or by the thread if it was descheduled past the caller's wait.
        for _ in 0 ..< 5_000 where waited != nil { usleep(1_000) }
        #expect(waited == nil)
        #expect(deinits.value.load(ordering: .sequentiallyConsistent) == 1)

        let release = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        weak var abandoned: Tracked?
        do {
            let tracked = Tracked(deinits)
            abandoned = tracked
            let (handed, _) = handOffWhenFree {
                release.wait()
                withExtendedLifetime(tracked) {}
                finished.signal()
            }
            waitBriefly(handed)                // gives up: the handler is blocked
        }
        #expect(abandoned != nil)              // the thread keeps it for the running handler
        release.signal()
        finished.wait()
        for _ in 0 ..< 5_000 where abandoned != nil { usleep(1_000) }
        #expect(abandoned == nil)
        #expect(deinits.value.load(ordering: .sequentiallyConsistent) == 2)
    }

    /// Many threads call gets and sets on one shared key and on keys of their own, as fast as they
    /// can: each thread's completions on every key arrive in its call order (a thread's calls on
    /// a key are ordered by the key's lanes), none inside a caller's call, and a get on its own key
    /// sees the last set it called before.
    @Test func callbackGetsKeepEachCallersOrderUnderStressFromManyThreads() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let threads = 12, operations = 400
        let order = Mutex<[String: [Int]]>([:])
        let failures = Mutex<[String]>([])
        let done = Countdown(threads * operations)
        let calling = CallingThreads()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            @Sendable func completed(_ key: String, _ step: Int, _ failure: String?) {
                if calling.currentThreadIsCalling { failures.withLock { $0.append("\(key) step \(step) ran inside a caller's call") } }
                if let failure { failures.withLock { $0.append("\(key) step \(step): \(failure)") } }
                order.withLock { $0["\(key)/\(thread)", default: []].append(step) }
                done.tick()
            }
            let own = "own\(thread)"
            var written = -1
            calling.calling {
                for step in 0 ..< operations {
                    let key = step % 3 == 0 ? "shared" : own
                    if step % 7 == 0 {
                        if key == own { written = step }
                        archive.set(key: key, data: bytes("\(step)")) { completed(key, step, $0.isSuccess ? nil : "\($0)") }
                    } else if key == own {
                        let expected = written
                        archive.get(key: key) { data, result in
                            let matches = expected < 0 ? data == nil : text(data) == "\(expected)"
                            completed(key, step, matches ? nil : "get saw \(text(data) ?? "nil"), expected \(expected)")
                        }
                    } else {
                        archive.get(key: key) { _, result in completed(key, step, result.isSuccess ? nil : "\(result)") }
                    }
                }
            }
        }
        await done.wait()
        #expect(failures.withLock { Array($0.prefix(5)) } == [])
        let inOrder = order.withLock { $0.values.allSatisfy { $0 == $0.sorted() } }
        let total = order.withLock { $0.values.reduce(0) { $0 + $1.count } }
        #expect(inOrder)
        #expect(total == threads * operations)
    }

    /// Callback gets of idle keys (handed off when the thread is free) interleaved with queued
    /// writes, from several threads on their own keys: every key's completions arrive in call
    /// order, none inside a caller's call, and every get sees the writes called before it.
    @Test func callbackGetsKeepCallOrderWithWritesAroundThem() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let threads = 4, operations = 600
        let order = Mutex<[Int: [Int]]>([:])
        let failures = Mutex<[String]>([])
        let done = Countdown(threads * operations)
        let calling = CallingThreads()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let key = "k\(thread)"
            @Sendable func completed(_ step: Int, _ failure: String?) {
                if calling.currentThreadIsCalling { failures.withLock { $0.append("\(key) step \(step) ran inside a caller's call") } }
                if let failure { failures.withLock { $0.append("\(key) step \(step): \(failure)") } }
                order.withLock { $0[thread, default: []].append(step) }
                done.tick()
            }
            var written = -1
            calling.calling {
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
        }
        await done.wait()
        #expect(failures.withLock { Array($0.prefix(5)) } == [])
        #expect(order.withLock { $0.values.allSatisfy { $0 == Array(0 ..< operations) } })
    }
}
