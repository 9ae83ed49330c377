import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Writers putting and re-referencing blobs, readers walking snapshots, and a collector running in
/// a loop, all at once; afterwards everything referenced reads back intact and verify is clean.
///
/// Runs `CONTENTSTORE_SOAK_SECONDS` (default 5; `make gc-soak` runs it for minutes).
@Suite(.blocking) struct GarbageCollectionSoakTests {
    static let seconds = min(3600, Double(ProcessInfo.processInfo.environment["CONTENTSTORE_SOAK_SECONDS"] ?? "") ?? 5)
    static let writers = 4
    static let keysPerWriter = 40

    /// A fixed set of contents the writers draw from, so that puts hit existing blobs (dedup,
    /// freshening) as often as they create new ones. Mixed sizes, half compressible.
    static let universe: [Data] = {
        var random = SeededRandom(seed: 2024)
        return (0 ..< 400).map { index in
            let size = 64 + Int(random.next() % 12_000)
            return index % 2 == 0 ? random.compressibleBytes(size) : random.bytes(size)
        }
    }()
    static let digests = universe.map(Digest.sha256)

    /// What the threads share.
    final class Shared: Sendable {
        let deadline: Date
        /// Key → indices into the universe, as last committed (each writer has keys of its own).
        let model = Mutex<[String: [Int]]>([:])
        let failures = Mutex<[String]>([])
        let commits = Atomic<Int>(0)
        let refusedCommits = Atomic<Int>(0)
        let snapshotReads = Atomic<Int>(0)
        let collections = Atomic<Int>(0)
        let blobsCollected = Atomic<Int>(0)
        let packsRewritten = Atomic<Int>(0)

        init(deadline: Date) {
            self.deadline = deadline
        }

        var running: Bool { Date() < deadline && failures.withLock { $0.count < 20 } }
        func fail(_ message: String) { failures.withLock { $0.append(message) } }
    }

    @Test func writersReadersAndCollectorsTogether() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing(durability: .full)
        configuration.packSizeTarget = 1 << 16
        configuration.packRewriteThreshold = 0.3
        configuration.garbageGracePeriod = .seconds(1)
        let store = try Store(at: dir.store, configuration: configuration)
        let shared = Shared(deadline: Date().addingTimeInterval(Self.seconds))

        var threads: [@Sendable () -> Void] = []
        for writer in 0 ..< Self.writers {
            threads.append { Self.write(as: writer, store: store, shared: shared) }
        }
        threads.append { Self.readSnapshots(store: store, shared: shared) }
        threads.append { Self.collect(store: store, shared: shared) }
        let group = DispatchGroup()
        for body in threads {
            group.enter()
            Thread {
                body()
                group.leave()
            }.start()
        }
        group.wait()

        let failures = shared.failures.withLock { $0 }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(shared.commits.load(ordering: .relaxed) > 0)
        #expect(shared.collections.load(ordering: .relaxed) > 0)
        #expect(shared.snapshotReads.load(ordering: .relaxed) > 0)
        print("soak: \(Self.seconds) s, \(shared.commits.load(ordering: .relaxed)) commits "
            + "(\(shared.refusedCommits.load(ordering: .relaxed)) refused for a collected blob and retried), "
            + "\(shared.snapshotReads.load(ordering: .relaxed)) snapshot walks, \(shared.collections.load(ordering: .relaxed)) collections "
            + "removing \(shared.blobsCollected.load(ordering: .relaxed)) blobs and rewriting \(shared.packsRewritten.load(ordering: .relaxed)) packs")

        let expected = shared.model.withLock { $0 }
        try Self.check(store, against: expected)
        #expect(try store.verify(VerificationOptions(readData: true)).problems == [])
        _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(try store.statistics().unreferencedBlobCount == 0)
        try store.close()

        let reopened = try Store(at: dir.store, configuration: .testing())
        try Self.check(reopened, against: expected)
        #expect(try reopened.verify(VerificationOptions(readData: true)).problems == [])
    }

    /// Sets records to a few random contents (put first, which freshens or stores them) or removes
    /// them. A commit refused with `missingBlob` lost a race with a grace-0 collection: put again.
    static func write(as writer: Int, store: Store, shared: Shared) {
        var random = SeededRandom(seed: UInt64(100 + writer))
        while shared.running {
            let key = "w\(writer)/\(random.next() % UInt64(keysPerWriter))"
            do {
                if random.next() % 5 == 0 {
                    try store.write { try $0.removeRecord(forKey: key) }
                    shared.model.withLock { $0[key] = nil }
                } else {
                    let indices = (0 ..< 1 + Int(random.next() % 4)).map { _ in Int(random.next() % UInt64(universe.count)) }
                    let references = try indices.map { try store.put(universe[$0]) }
                    try store.write { try $0.setRecord(Record(value: Data("\(indices)".utf8), references: references), forKey: key) }
                    shared.model.withLock { $0[key] = indices }
                }
                shared.commits.add(1, ordering: .relaxed)
            } catch let error as StoreError where error.code == .missingBlob {
                shared.refusedCommits.add(1, ordering: .relaxed)
            } catch {
                shared.fail("writer \(writer): \(error)")
            }
        }
    }

    /// Walks whole snapshots: every blob a snapshot's records reference must read back, however
    /// the records change and whatever the collector does meanwhile.
    static func readSnapshots(store: Store, shared: Shared) {
        while shared.running {
            do {
                try store.read { snapshot in
                    for key in try snapshot.keys(withPrefix: "") {
                        for digest in try snapshot.record(forKey: key)?.references ?? [] {
                            _ = try snapshot.get(digest)  // re-hashed against the digest
                        }
                    }
                }
                shared.snapshotReads.add(1, ordering: .relaxed)
            } catch {
                shared.fail("snapshot reader: \(error)")
            }
        }
    }

    /// Collects in a loop: mostly with the configured grace period (freshening protects writers),
    /// every third run with none (writers may then see `missingBlob`), checkpoints now and then.
    static func collect(store: Store, shared: Shared) {
        var round = 0
        while shared.running {
            do {
                let options = GarbageCollectionOptions(gracePeriod: round % 3 == 2 ? .zero : nil)
                let report = try store.collectGarbage(options)
                shared.collections.add(1, ordering: .relaxed)
                shared.blobsCollected.add(report.blobsRemoved, ordering: .relaxed)
                shared.packsRewritten.add(report.packsRewritten, ordering: .relaxed)
                if report.packsSkipped > 0 { shared.fail("collection skipped \(report.packsSkipped) packs as damaged") }
                if round % 10 == 9 { try store.checkpoint() }
            } catch {
                shared.fail("collector: \(error)")
            }
            round += 1
        }
    }

    /// The store's records are exactly the model's, and each referenced blob holds its content.
    static func check(_ store: Store, against expected: [String: [Int]]) throws {
        #expect(try Set(store.keys(withPrefix: "")) == Set(expected.keys))
        for (key, indices) in expected {
            let record = try #require(try store.record(forKey: key), "\(key)")
            #expect(record.references == indices.map { digests[$0] }, "\(key)")
            for index in indices { #expect(try store.get(digests[index]) == universe[index], "\(key)") }
        }
    }
}
