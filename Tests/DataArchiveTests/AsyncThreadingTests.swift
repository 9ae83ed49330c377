import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// The async API waits on the store's threads, never on the cooperative pool. The first test is
/// pool-sensitive: the Makefile runs it in a process of its own (`POOL_TEST`), as Store's twin of it.
@Suite struct AsyncThreadingTests {
    let directory = TemporaryDirectory()

    /// While a transaction holds the writer for 2 s (on a plain thread), 64 tasks awaiting archive
    /// changes — 32 keys of their own, 32 queued behind each other on one key — leave every thread
    /// of the cooperative pool free; cancelling them gives `CancellationError` and commits nothing.
    @Test func waitingArchiveCallsLeaveTheCooperativePoolFree() async throws {
        let store = try makeStore(directory)
        let archive = DataArchive(store: store)
        let holding = Flag()
        let checksFinished = Flag()
        let released = Flag()
        let holder = Thread {
            try? store.write { transaction in
                holding.set()
                try transaction.setRecord(Record(value: bytes("held")), forKey: "holder")
                let started = Date()
                Thread.sleep(forTimeInterval: 2)
                while !checksFinished.isSet && Date().timeIntervalSince(started) < 300 { Thread.sleep(forTimeInterval: 0.01) }
            }
            released.set()
        }
        let alone = await Task { await tick() }.value
        holder.start()
        while !holding.isSet { try await Task.sleep(for: .milliseconds(5)) }

        let waiters = (0 ..< 64).map { index in
            Task {
                let key = index < 32 ? "waiter \(index)" : "shared"
                try await archive.archiveCurrent(andSet: bytes("\(index)"), forKey: key)
            }
        }
        // Let every waiter reach the store (or its key's queue).
        try await Task.sleep(for: .milliseconds(200))
        let withWaiters = await Task { await tick() }.value
        let poolWidth = ProcessInfo.processInfo.activeProcessorCount
        let everyThreadRan = await allRunAtOnce(poolWidth, within: .milliseconds(1500))
        checksFinished.set()
        #expect(!released.isSet, "the checks needed the writer released: waiters occupied the pool")
        #expect(everyThreadRan, "\(poolWidth) tasks could not run at once: a waiter blocks a cooperative thread")
        if alone < .milliseconds(200) {
            #expect(withWaiters < .seconds(1), "100 yields took \(withWaiters) with 64 waiters, \(alone) alone")
        }

        for waiter in waiters { waiter.cancel() }
        for waiter in waiters {
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
        while !released.isSet { try await Task.sleep(for: .milliseconds(10)) }
        #expect(archive.keys.isEmpty)
        #expect(try await archive.allVersions(forKey: "shared").isEmpty)
        #expect(try await store.record(forKey: "holder")?.value == bytes("held"))

        // The key's turns all passed: it takes changes again, in order.
        try await archive.archiveCurrent(andSet: bytes("a"), forKey: "shared")
        try await archive.archiveCurrent(andSet: bytes("b"), forKey: "shared")
        #expect(try await archive.allVersions(forKey: "shared").map(text) == ["b", "a"])
        try await store.close()
    }

    /// A change whose task is cancelled before it is called changes nothing; one queued behind a
    /// running change on its key and cancelled there throws at once, and the key moves on.
    @Test func cancelledChangesCommitNothing() async throws {
        let store = try makeStore(directory)
        let archive = DataArchive(store: store)
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await archive.set(bytes("early"), forKey: "doc")
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await archive.data(forKey: "doc") == nil)

        // A converter that blocks keeps the key's lane busy while a queued async change is cancelled.
        let converting = Flag()
        let proceed = Flag()
        archive.set(key: "doc", value: SlowConverter(started: converting, proceed: proceed, bytes: bytes("first")))
        while !converting.isSet { try await Task.sleep(for: .milliseconds(2)) }
        let queued = Task { try await archive.archiveCurrent(andSet: bytes("queued"), forKey: "doc") }
        try await Task.sleep(for: .milliseconds(50))
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        proceed.set()
        try await archive.archiveCurrent(andSet: bytes("second"), forKey: "doc")
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["second", "first"])
        try await store.close()
    }
}

/// 100 yields on the cooperative pool, timed.
private func tick() async -> Duration {
    let started = ContinuousClock.now
    for _ in 0 ..< 100 { await Task.yield() }
    return ContinuousClock.now - started
}

/// Whether `count` tasks were running at the same moment before `limit` passed: each arrives, then
/// spins (holding its thread) until all have arrived, so they all arrive only if the pool has
/// `count` free threads.
private func allRunAtOnce(_ count: Int, within limit: Duration) async -> Bool {
    let arrived = Arrivals()
    let deadline = ContinuousClock.now + limit
    return await withTaskGroup(of: Bool.self) { group in
        for _ in 0 ..< count {
            group.addTask {
                arrived.count.add(1, ordering: .acquiringAndReleasing)
                while arrived.count.load(ordering: .acquiring) < count {
                    if ContinuousClock.now > deadline { return false }
                }
                return true
            }
        }
        return await group.allSatisfy { $0 }
    }
}

/// A value whose conversion to data waits until told to proceed (run on the key's lane).
private struct SlowConverter: ValueConverter {
    let started: Flag
    let proceed: Flag
    let bytes: Data

    static func from(data: Data) -> SlowConverter? { nil }
    var value: Data { bytes }
    var toData: Data? {
        started.set()
        while !proceed.isSet { Thread.sleep(forTimeInterval: 0.002) }
        return bytes
    }
}

private final class Arrivals: Sendable {
    let count = Atomic<Int>(0)
}

private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
