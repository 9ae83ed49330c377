import ContentStore
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

/// Per-key order, cross-key parallelism, and where completions run.
@Suite struct OrderingTests {
    let directory = TemporaryDirectory()

    /// 8 threads each drive 1,000 keys with fire-and-forget writes followed by reads; every read sees
    /// exactly the writes called before it, and every key's completions arrive in call order.
    @Test(.blocking) func orderUnderEightThreadsTimesAThousandKeys() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let threads = 8, keysPerThread = 1000, operationsPerKey = 6
        let done = Countdown(threads * keysPerThread * operationsPerKey)
        let failures = Mutex<[String]>([])
        let order = Mutex<[String: [Int]]>([:])

        @Sendable func completed(_ key: String, _ step: Int, _ ok: Bool, _ what: @autoclosure () -> String) {
            if !ok { failures.withLock { $0.append("\(key) step \(step): \(what())") } }
            order.withLock { $0[key, default: []].append(step) }
            done.tick()
        }

        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0 ..< keysPerThread {
                let key = "t\(thread)/k\(index)"
                let v1 = bytes("\(key) v1"), v2 = bytes("\(key) v2"), v3 = bytes("\(key) v3")
                archive.set(key: key, data: v1) { completed(key, 0, $0.isSuccess, "\($0)") }
                archive.archiveCurrent(key: key, andSetNewData: v2) { completed(key, 1, $0.isSuccess, "\($0)") }
                archive.get(key: key) { data, result in completed(key, 2, result.isSuccess && data == v2, "get \(text(data) ?? "nil")") }
                archive.archiveCurrent(key: key, andSetNewData: v3) { completed(key, 3, $0.isSuccess, "\($0)") }
                archive.getAll(key: key) { all, result in
                    completed(key, 4, result.isSuccess && all == [v3, v2, v1], "getAll \(all.map { text($0) ?? "" })")
                }
                archive.delete(key: key) { completed(key, 5, $0.isSuccess, "\($0)") }
            }
        }
        await done.wait()
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { Array($0.prefix(5)) })")
        let outOfOrder = order.withLock { order in order.filter { $0.value != Array(0 ..< operationsPerKey) }.count }
        #expect(outOfOrder == 0)
        #expect(order.withLock { $0.count } == threads * keysPerThread)
        #expect(archive.keys.isEmpty)
    }

    @Test func completionsOfOneKeyRunInCallOrderOneAtATime() async {
        let archive = DataArchive(rootUrl: directory.url)
        let count = 200
        let seen = Mutex<[Int]>([])
        let running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let done = Countdown(count)
        for index in 0 ..< count {
            let handler: DataArchiveCompletionHandler = { _ in
                if running.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                seen.withLock { $0.append(index) }
                running.subtract(1, ordering: .sequentiallyConsistent)
                done.tick()
            }
            switch index % 3 {
            case 0: archive.archiveCurrent(key: "k", andSetNewData: bytes("\(index)"), completionHandler: handler)
            case 1: archive.keep(upTo: 5, archivesForKey: "k", completionHandler: handler)
            default: archive.get(key: "k") { _, result in handler(result) }
            }
        }
        await done.wait()
        #expect(seen.withLock { $0 } == Array(0 ..< count))
        let didOverlap = overlapped.load(ordering: .relaxed)
        #expect(!didOverlap)
        #expect(archive.numberOfArchives(key: "k") == 5)
    }

    /// Completions run on another thread, never inside the call — also for results known at once.
    @Test func completionsNeverRunOnTheCallersStack() async {
        let archive = DataArchive(rootUrl: directory.url)
        let caller = pthread_self()
        let returned = Atomic<Int>(0)
        let done = Countdown(5)
        let check: DataArchiveCompletionHandler = { _ in
            #expect(pthread_equal(pthread_self(), caller) == 0)
            done.tick()
        }
        archive.keep(upTo: 0, archivesForKey: "k", completionHandler: check)
        archive.set(key: "", data: bytes("x"), completionHandler: check)
        archive.delete(key: "missing", completionHandler: check)
        archive.get(key: "missing") { _, result in check(result) }
        archive.lazyLockingReader(key: "missing") { _ in check(.success) }
        returned.store(1, ordering: .sequentiallyConsistent)
        await done.wait()
    }

    /// A read of a key with nothing queued runs at once on the caller's thread; one called right
    /// after a fire-and-forget write still waits for it, in both APIs.
    @Test func readsRightAfterFireAndForgetWritesSeeThem() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        for index in 0 ..< 300 {
            let key = "k\(index % 4)", value = bytes("\(index)")
            switch index % 4 {
            case 0:
                archive.set(key: key, data: value)
                #expect(try await archive.data(forKey: key) == value)
            case 1:
                archive.archiveCurrent(key: key, andSetNewData: value)
                #expect(try await archive.allVersions(forKey: key).first == value)
            case 2:
                archive.set(key: key, data: value)
                #expect(await archive.getAndWait(key).0 == value)
            default:
                archive.archiveCurrent(key: key, andSetNewData: value)
                let (versions, result) = await archive.getAllAndWait(key)
                #expect(result.isSuccess && versions.first == value)
            }
        }
    }

    /// Reads racing writes of the same key from another thread: each sees every write called before
    /// it started (and nothing torn), whether it ran inline or queued behind a write.
    @Test func readsRacingWritesFromAnotherThreadSeeEveryEarlierWrite() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let writes = 400
        let called = Atomic<Int>(0)                            // writes called so far
        try await archive.set(bytes("0"), forKey: "k")
        let writer = Thread {
            for index in 1 ... writes {
                archive.archiveCurrent(key: "k", andSetNewData: bytes("\(index)"))
                called.store(index, ordering: .sequentiallyConsistent)
                if index % 50 == 0 { usleep(1000) }
            }
        }
        writer.start()
        var last = 0, rounds = 0
        while last < writes && rounds < 100_000 {
            rounds += 1
            let before = called.load(ordering: .sequentiallyConsistent)
            let versions = try await archive.allVersions(forKey: "k").map { Int(text($0)!)! }
            let current = versions[0]
            #expect(current >= before && current >= last, "read \(current) after \(before) writes were called")
            #expect(versions == Array((0 ... current).reversed()), "versions of one snapshot")
            let single = Int(text(try await archive.data(forKey: "k"))!)!
            #expect(single >= current)
            last = single
        }
        #expect(last == writes)
    }

    /// A key whose operation is stuck does not hold up other keys.
    @Test func differentKeysRunInParallel() async {
        let archive = DataArchive(rootUrl: directory.url)
        let release = DispatchSemaphore(value: 0)
        let blocked = BlockingValue(release: release)
        let slow = Countdown(1)
        archive.set(key: "slow", value: blocked) { result in
            #expect(result.isSuccess)
            slow.tick()
        }
        // Runs to completion while "slow" is still inside toData.
        #expect(await archive.setAndWait("fast", bytes("f")).isSuccess)
        #expect(await archive.getAndWait("fast").0 == bytes("f"))
        release.signal()
        await slow.wait()
        #expect(await archive.getAndWait("slow").0 == bytes("released"))
        let timedOut = blocked.timedOut.load(ordering: .relaxed)
        #expect(!timedOut)
    }

    /// `keys` and `numberOfArchives` see every operation called before them.
    @Test(.blocking) func synchronousQueriesSeeEarlierCalls() {
        let archive = DataArchive(rootUrl: directory.url)
        for index in 1 ... 5 {
            archive.archiveCurrent(key: "doc", andSetNewData: bytes("v\(index)"))
        }
        #expect(archive.numberOfArchives(key: "doc") == 4)
        archive.set(key: "b", data: bytes("b"))
        archive.set(key: "a", data: bytes("a"))
        #expect(archive.keys == ["a", "b", "doc"])
        archive.keep(upTo: 1, archivesForKey: "doc")
        #expect(archive.numberOfArchives(key: "doc") == 1)
        archive.delete(key: "doc")
        #expect(archive.keys == ["a", "b"])
        #expect(archive.numberOfArchives(key: "doc") == 0)
    }

    /// Blocking queries from a completion handler or a converter neither deadlock nor fail.
    @Test(.blocking) func synchronousQueriesFromCallbacksDoNotDeadlock() async {
        let archive = DataArchive(rootUrl: directory.url)
        let done = Countdown(1)
        archive.set(key: "a", data: bytes("1")) { _ in
            // In a completion: waits for the operations called before, which do not wait for completions.
            archive.set(key: "a", data: bytes("2"))
            archive.archiveCurrent(key: "a", andSetNewData: bytes("3"))
            #expect(archive.keys == ["a"])
            #expect(archive.numberOfArchives(key: "a") == 1)
            done.tick()
        }
        await done.wait()
        let queried = await result { archive.set(key: "b", value: QueryingValue(archive: archive), completionHandler: $0) }
        #expect(queried.isSuccess)
        #expect(archive.keys == ["a", "b"])
    }
}

/// A value whose `toData` blocks until released (for at most 30 s).
final class BlockingValue: ValueConverter, Sendable {
    let release: DispatchSemaphore
    let timedOut = Atomic<Bool>(false)
    init(release: DispatchSemaphore) { self.release = release }
    static func from(data: Data) -> BlockingValue? { nil }
    var toData: Data? {
        // Long enough that only a real deadlock (the other key waiting for this one) times it out:
        // under a sanitizer the whole suite keeps the cooperative pool busy for minutes, and the
        // test's awaits between `set` and `release` wait for a thread that long.
        if release.wait(timeout: .now() + 600) == .timedOut { timedOut.store(true, ordering: .relaxed) }
        return bytes("released")
    }
    var value: Int { 0 }
}

/// A value whose `toData` asks the archive synchronous questions from inside an operation.
struct QueryingValue: ValueConverter {
    let archive: DataArchive
    static func from(data: Data) -> QueryingValue? { nil }
    var toData: Data? {
        _ = archive.keys
        _ = archive.numberOfArchives(key: "b")
        return bytes("queried")
    }
    var value: Int { 0 }
}
