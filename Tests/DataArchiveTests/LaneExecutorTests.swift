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

/// The executor behind per-key ordering, tested on its own.
@Suite(.blocking) struct LaneExecutorTests {
    @Test func jobsOfOneLaneRunInSubmissionOrderNeverOverlapping() async {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 4)
        let lanes = 50, jobsPerLane = 200
        let logs = Mutex<[Int: [Int]]>([:])
        let running = Mutex<Set<Int>>([])
        let overlaps = Atomic<Int>(0)
        let done = Countdown(lanes * jobsPerLane)
        DispatchQueue.concurrentPerform(iterations: lanes) { lane in
            for job in 0 ..< jobsPerLane {
                executor.submit(lane) {
                    if !running.withLock({ $0.insert(lane).inserted }) { overlaps.add(1, ordering: .relaxed) }
                    logs.withLock { $0[lane, default: []].append(job) }
                    running.withLock { _ = $0.remove(lane) }
                    done.tick()
                }
            }
        }
        await done.wait()
        #expect(logs.withLock { $0.values.allSatisfy { $0 == Array(0 ..< jobsPerLane) } })
        #expect(logs.withLock { $0.count } == lanes)
        let overlapCount = overlaps.load(ordering: .relaxed)
        #expect(overlapCount == 0)
    }

    @Test func atMostWidthJobsRunAtOnce() async {
        let width = 3
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: width)
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        let done = Countdown(60)
        for lane in 0 ..< 60 {
            executor.submit(lane) {
                let now = running.add(1, ordering: .sequentiallyConsistent).newValue
                peak.max(now, ordering: .sequentiallyConsistent)
                usleep(2000)                                   // blocks, so more workers start
                running.subtract(1, ordering: .sequentiallyConsistent)
                done.tick()
            }
        }
        await done.wait()
        let observed = peak.load(ordering: .sequentiallyConsistent)
        #expect(observed <= width)
        #expect(observed >= 2)                                  // blocked workers brought in others
    }

    @Test func waitUntilFinishedWaitsForEveryEarlierJob() {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 4)
        let finished = Mutex<Set<Int>>([])
        for index in 0 ..< 40 {
            executor.submit(index % 7) {
                usleep(UInt32(200 * (index % 5)))
                finished.withLock { _ = $0.insert(index) }
            }
        }
        executor.waitUntilFinished(through: executor.lastTicket)
        #expect(finished.withLock { $0.count } == 40)
        // Nothing pending: returns at once.
        executor.waitUntilFinished(through: executor.lastTicket)
    }

    @Test func waitingOnAWorkerDoesNotDeadlock() async {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 1)
        let done = Countdown(1)
        executor.submit(0) {
            #expect(executor.isCurrentThreadWorker)
            executor.waitUntilFinished(through: executor.lastTicket)   // would wait for itself
            done.tick()
        }
        await done.wait()
        #expect(!executor.isCurrentThreadWorker)
    }

    @Test func runIfIdleRunsOnTheCallerOnlyWhenTheLaneIsIdle() async {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 2)
        let caller = pthread_self()
        #expect(executor.runIfIdle(0) { pthread_equal(pthread_self(), caller) != 0 } == true)
        let release = DispatchSemaphore(value: 0)
        let done = Countdown(1)
        executor.submit(0) {
            release.wait()
            done.tick()
        }
        // Lane 0 has a job running: nothing runs inline there, other lanes are not affected.
        #expect(executor.runIfIdle(0) { 0 } == nil)
        #expect(executor.runIfIdle(1) { 1 } == 1)
        release.signal()
        await done.wait()
    }

    @Test func jobsSubmittedDuringAnInlineRunWaitForItThenRunInOrder() async {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 2)
        let log = Mutex<[Int]>([])
        let done = Countdown(3)
        let ran: Void? = executor.runIfIdle(0) {
            for index in 1 ... 3 {
                executor.submit(0) {
                    log.withLock { $0.append(index) }
                    done.tick()
                }
            }
            usleep(20_000)                                     // time for a wrongly started job to run
            log.withLock { $0.append(0) }
        }
        #expect(ran != nil)
        await done.wait()
        #expect(log.withLock { $0 } == [0, 1, 2, 3])
    }

    @Test func waitUntilFinishedWaitsForAnInlineRun() {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 2)
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false)
        DispatchQueue.global().async {
            executor.runIfIdle(0) {
                entered.signal()
                release.wait()
                finished.store(true, ordering: .sequentiallyConsistent)
            }
        }
        entered.wait()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { release.signal() }
        executor.waitUntilFinished(through: executor.lastTicket)
        let hasFinished = finished.load(ordering: .sequentiallyConsistent)
        #expect(hasFinished)
    }

    /// A claimed lane refuses another claim and holds the jobs submitted to it until the claim is
    /// released, from any thread; then they run in order, and the lane is idle again afterwards.
    /// The same with an executor that keeps no tickets (the completion executor).
    @Test(arguments: [true, false]) func aClaimHoldsItsLaneUntilReleasedFromAnyThread(waitable: Bool) async {
        let executor = LaneExecutor<Int, ClosureJob>(label: "test", width: 2, waitable: waitable)
        let log = Mutex<[Int]>([])
        let done = Countdown(3)
        guard let claim = executor.claimIfIdle(0) else {
            Issue.record("an idle lane was not claimed")
            return
        }
        #expect(executor.claimIfIdle(0) == nil)
        #expect(executor.claimIfIdle(1) != nil)                 // other lanes are not held
        for index in 1 ... 3 {
            executor.submit(0) {
                log.withLock { $0.append(index) }
                done.tick()
            }
        }
        usleep(20_000)                                         // time for a wrongly started job to run
        #expect(log.withLock { $0 }.isEmpty)
        DispatchQueue.global().async { executor.release(claim) }
        await done.wait()
        #expect(log.withLock { $0 } == [1, 2, 3])
        // The last job's bookkeeping follows its body: poll briefly for the lane to come free.
        var idleAgain = executor.claimIfIdle(0)
        for _ in 0 ..< 1_000 where idleAgain == nil {
            usleep(1_000)
            idleAgain = executor.claimIfIdle(0)
        }
        #expect(idleAgain != nil)
        // A claim of an idle lane ends with nothing queued behind it: the lane is idle at once.
        if let idleAgain { executor.release(idleAgain) }
        #expect(executor.claimIfIdle(0) != nil)
    }

    @Test func fifoReleasesElementsAndKeepsOrder() {
        var fifo = FIFO<Int>()
        for value in 0 ..< 5000 { fifo.append(value) }
        var popped: [Int] = []
        while popped.count < 2500, let value = fifo.popFirst() { popped.append(value) }
        for value in 5000 ..< 6000 { fifo.append(value) }
        while let value = fifo.popFirst() { popped.append(value) }
        #expect(popped == Array(0 ..< 6000))
        #expect(fifo.isEmpty)
    }
}
