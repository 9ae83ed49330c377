import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Collection: grace period, freshening, dry run, pack rewriting, snapshots, races with writers.
@Suite(.blocking) struct GarbageCollectionTests {
    /// Collection walks this set; a bulk load passes every blob through it (unreferenced from its
    /// put to its commit), and it must not keep the room for all of them afterwards.
    @Test func theUnreferencedSetShrinksOnceABulkLoadIsReferenced() {
        var index = BlobIndex()
        let digests = (0 ..< 20_000).map { Digest.sha256(Data("blob \($0)".utf8)) }
        for (i, digest) in digests.enumerated() {
            index.place(LogRecord.BlobPlacement(digest: digest, location: BlobLocation(pack: 1, offset: UInt64(32 + 100 * i)),
                                                compressed: false, rawLength: 44, storedLength: 44, time: 0))
        }
        let grown = index.unreferenced.capacity
        #expect(grown >= 20_000)
        for digest in digests.dropFirst(10) {
            let adjusted = index.adjustReferences(of: digest, by: 1, time: 0)
            #expect(adjusted)
        }
        #expect(index.unreferenced == Set(digests.prefix(10)))
        #expect(index.unreferenced.capacity <= 2048, "capacity \(index.unreferenced.capacity), was \(grown)")
    }

    @Test func gracePeriodIsHonouredOnTheInjectedClock() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        var configuration = Store.Configuration.testing(clock: clock)
        configuration.garbageGracePeriod = .seconds(60)
        let store = try Store(at: dir.store, configuration: configuration)

        let unreferenced = try store.put(Data("never referenced".utf8))
        let released = try store.put(Data("referenced, then released".utf8))
        try store.write { try $0.setRecord(Record(references: [released]), forKey: "r") }

        clock.advance(by: 1000)
        try store.write { try $0.removeRecord(forKey: "r") }  // `released` becomes garbage now, not at its put
        #expect(try store.collectGarbage().blobsRemoved == 1)
        #expect(!store.contains(unreferenced))
        #expect(store.contains(released))

        clock.advance(by: 59)
        #expect(try store.collectGarbage().blobsRemoved == 0, "59 s < 60 s grace")
        #expect(store.contains(released))
        clock.advance(by: 2)  // clearly past the grace period, whatever the sub-second parts were
        let report = try store.collectGarbage()
        #expect(report.blobsRemoved == 1)
        #expect(report.logicalBytesFreed == UInt64("referenced, then released".utf8.count))
        #expect(!store.contains(released))

        // An explicit grace period overrides the configuration's.
        let other = try store.put(Data("other".utf8))
        clock.advance(by: 11)
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(30))).blobsRemoved == 0)
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(10))).blobsRemoved == 1)
        #expect(!store.contains(other))
        #expect(throws: StoreError.code(.invalidArgument)) {
            try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(-1)))
        }
        var badThreshold = GarbageCollectionOptions()
        badThreshold.packRewriteThreshold = 0
        #expect(throws: StoreError.code(.invalidArgument)) { try store.collectGarbage(badThreshold) }
    }

    @Test func expiryNeverComesEarly() {
        let grace = Duration.seconds(60)
        #expect(!LocalEngine.hasExpired(zeroSince: 100, now: 160, grace: grace), "up to 59.x s may have passed")
        #expect(LocalEngine.hasExpired(zeroSince: 100, now: 161, grace: grace))
        #expect(!LocalEngine.hasExpired(zeroSince: 100, now: 161, grace: .milliseconds(60_500)), "rounded up to 61 s")
        #expect(!LocalEngine.hasExpired(zeroSince: 200, now: 100, grace: grace), "a clock behind the blob's time removes nothing")
        #expect(LocalEngine.hasExpired(zeroSince: 100, now: 100, grace: .zero))
        #expect(LocalEngine.hasExpired(zeroSince: 200, now: 100, grace: .zero), "no grace: every unreferenced blob")
    }

    @Test func puttingAGarbageBlobAgainFreshensIt() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        var configuration = Store.Configuration.testing(clock: clock)
        configuration.garbageGracePeriod = .seconds(60)
        let store = try Store(at: dir.store, configuration: configuration)
        let data = Data("put twice".utf8)

        let digest = try store.put(data)
        let storedBefore = try store.statistics().storedBytes
        clock.advance(by: 50)
        #expect(try store.put(data) == digest)
        #expect(try store.statistics().storedBytes == storedBefore, "a re-put writes nothing")

        clock.advance(by: 30)  // 80 s after the first put, 30 s after the second
        #expect(try store.collectGarbage().blobsRemoved == 0)
        #expect(store.contains(digest))
        // The writer that re-put it can now reference it.
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        clock.advance(by: 1000)
        #expect(try store.collectGarbage().blobsRemoved == 0, "referenced blobs are never collected")

        try store.write { try $0.removeRecord(forKey: "k") }
        clock.advance(by: 61)
        #expect(try store.collectGarbage().blobsRemoved == 1)
        #expect(!store.contains(digest))
    }

    @Test func aCommitReferencingACollectedBlobIsRefused() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(Data("short-lived".utf8))
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 1)
        #expect(throws: StoreError.code(.missingBlob)) {
            try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        }
        #expect(try store.record(forKey: "k") == nil)
        #expect(try store.put(Data("short-lived".utf8)) == digest)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        #expect(try store.get(digest) == Data("short-lived".utf8))
    }

    @Test func dryRunChangesNothing() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        var fixture = try PackFixture(store: store)
        try fixture.release(allOfPacks: 1, mostOfPacks: 2)
        try store.checkpoint()  // so the WAL segment is short and stable

        let filesBefore = try StoreFiles(dir.store)
        let statisticsBefore = try store.statistics()
        let countsBefore = fixture.digests.map { (store.contains($0), store.refCount(of: $0)) }

        var options = GarbageCollectionOptions(gracePeriod: .zero, dryRun: true)
        let dryRun = try store.collectGarbage(options)
        #expect(dryRun.dryRun)
        #expect(dryRun.blobsRemoved > 0 && dryRun.packsDeleted >= 2 && dryRun.packsRewritten >= 1 && dryRun.bytesReclaimed > 0)

        #expect(try StoreFiles(dir.store) == filesBefore, "a dry run writes, renames or deletes no file")
        #expect(try store.statistics() == statisticsBefore)
        #expect(fixture.digests.map { (store.contains($0), store.refCount(of: $0)) }.elementsEqual(countsBefore) { $0 == $1 })

        options.dryRun = false
        let real = try store.collectGarbage(options)
        #expect(!real.dryRun)
        #expect(real.blobsRemoved == dryRun.blobsRemoved)
        #expect(real.bytesFreed == dryRun.bytesFreed)
        #expect(real.packsDeleted == dryRun.packsDeleted)
        #expect(real.packsRewritten == dryRun.packsRewritten)
        #expect(real.bytesCopied == dryRun.bytesCopied)
        #expect(real.bytesReclaimed == dryRun.bytesReclaimed)
    }

    @Test func packsAreRewrittenAndDeletedAndTheBytesReturn() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        var fixture = try PackFixture(store: store)
        let (deadPacks, rewrittenPacks) = try fixture.release(allOfPacks: 2, mostOfPacks: 3)
        let packsDirectory = dir.store.appendingPathComponent("packs")
        // The files are measured: the active pack's deferred bytes (small puts') are written first.
        try store.packs.writeDeferred()
        let diskBefore = try StoreFiles(packsDirectory).totalBytes

        let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved == fixture.released.count)
        #expect(report.packsDeleted == deadPacks.count + rewrittenPacks.count)
        #expect(report.packsRewritten == rewrittenPacks.count)
        #expect(report.packsSkipped == 0)
        #expect(report.bytesCopied > 0)
        for pack in deadPacks + rewrittenPacks {
            #expect(!FileManager.default.fileExists(atPath: store.packs.path(of: pack)), "pack \(pack) deleted")
        }
        try store.packs.writeDeferred()
        let diskAfter = try StoreFiles(packsDirectory).totalBytes
        // What was deleted, less what was copied into the new active pack (and its header), left the disk.
        #expect(diskBefore - diskAfter == report.bytesReclaimed - UInt64(PackFormat.headerSize))

        for digest in fixture.kept { #expect(try store.get(digest) == fixture.contents[digest]) }
        for digest in fixture.released { #expect(!store.contains(digest)) }
        #expect(try store.verify(.init(readData: true)).problems == [])
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).packsDeleted == 0, "nothing left to do")

        try store.close()
        let reopened = try Store(at: dir.store, configuration: .packed())
        for digest in fixture.kept { #expect(try reopened.get(digest) == fixture.contents[digest]) }
        #expect(try reopened.verify(.init(readData: true)).problems == [])
    }

    @Test func aSnapshotKeepsWhatItSeesUntilReleased() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(Data("seen by a snapshot".utf8))
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }

        var snapshot: Snapshot? = try store.makeSnapshot()
        try store.write { try $0.removeRecord(forKey: "k") }
        #expect(store.refCount(of: digest) == 0)
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 0)
        let reference = try #require(try snapshot?.record(forKey: "k")?.references.first)
        #expect(try snapshot?.get(reference) == Data("seen by a snapshot".utf8))

        // The scoped form protects too, for as long as the closure runs.
        let removedWhileReading = try store.read { _ in
            try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved
        }
        #expect(removedWhileReading == 0)
        snapshot = nil
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 1)
        #expect(!store.contains(digest))
    }

    /// The unpinned view of `readLatest` does not protect what it sees: when a blob it reads was
    /// dropped and collected meanwhile, the read runs again on a snapshot and sees the newer state.
    @Test func readLatestReadsAgainOnASnapshotWhenItsBlobWasCollected() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let old = try store.put(Data("old".utf8)), new = try store.put(Data("new".utf8))
        try store.write { try $0.setRecord(Record(references: [old]), forKey: "k") }

        var runs = 0
        let read = try store.readLatest { view -> Data in
            runs += 1
            let reference = try #require(try view.record(forKey: "k")?.references.first)
            if runs == 1 {  // a writer replaces the reference and a collection takes the old blob
                try store.write { try $0.setRecord(Record(references: [new]), forKey: "k") }
                #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 1)
            }
            return try view.get(reference)
        }
        #expect(read == Data("new".utf8))
        #expect(runs == 2)
        #expect(throws: StoreError.code(.notFound)) { try store.readLatest { try $0.get(old) } }
    }

    @Test func aSnapshotTakenBeforeTheClockStepsBackStillProtects() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let store = try Store(at: dir.store, configuration: .testing(clock: clock))
        let digest = try store.put(Data("x".utf8))
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        let snapshot = try store.makeSnapshot()
        clock.advance(by: -3600)  // NTP steps the wall clock back an hour
        try store.write { try $0.removeRecord(forKey: "k") }
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 0)
        #expect(try snapshot.get(digest) == Data("x".utf8))
    }

    /// A commit reads the clock, then a snapshot is taken (and pinned at a later second) before
    /// the commit applies: the blob the commit unreferences must still count as seen by the
    /// snapshot. The clock is read under the lock that orders commits and snapshots, so the
    /// snapshot waits for the commit and pins at its time.
    @Test func aCommitRacingASnapshotCannotUnprotectItsBlobs() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let armed = Atomic<Bool>(false)
        let clockRead = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0)
        var configuration = Store.Configuration.testing()
        configuration.now = {
            let now = clock.now
            if armed.exchange(false, ordering: .relaxed) {
                clockRead.signal()  // the commit has its time...
                proceed.wait()  // ...and is held here until the snapshot has been asked for
            }
            return now
        }
        let store = try Store(at: dir.store, configuration: configuration)
        let digest = try store.put(Data("raced".utf8))
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }

        armed.store(true, ordering: .relaxed)
        // Threads, not a dispatch queue: the reader must run while the writer is held.
        let writerDone = DispatchSemaphore(value: 0), readerDone = DispatchSemaphore(value: 0)
        Thread {
            _ = try? store.write { try $0.removeRecord(forKey: "k") }
            writerDone.signal()
        }.start()
        clockRead.wait()
        clock.advance(by: 10)
        let snapshot = Mutex<Snapshot?>(nil)
        Thread {
            let taken = try? store.makeSnapshot()
            snapshot.withLock { $0 = taken }
            readerDone.signal()
        }.start()
        let readerFinishedFirst = readerDone.wait(timeout: .now() + 0.2) == .success  // it may wait for the commit
        proceed.signal()
        writerDone.wait()
        if !readerFinishedFirst { readerDone.wait() }

        let taken = try #require(snapshot.withLock { $0 })
        let removed = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved
        if try taken.record(forKey: "k") != nil {
            #expect(removed == 0, "the snapshot sees the record, so its blob stays")
            #expect(try taken.get(digest) == Data("raced".utf8))
        }
    }

    /// A sealed pack's trailing index is overhead, not garbage. Counted as dead, packs of small blobs
    /// (56-byte entry header + a few bytes + 48 bytes of index each) would pass a 50% threshold with
    /// little garbage, and be rewritten by every collection forever.
    @Test func packsOfSmallBlobsAreNotChurned() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        var random = SeededRandom(seed: 5)
        var digests: [Digest] = []
        for _ in 0 ..< 3000 { digests.append(try store.put(random.bytes(8))) }
        try store.write { transaction in
            for (index, digest) in digests.enumerated() where index % 5 != 0 {
                try transaction.setRecord(Record(references: [digest]), forKey: "k\(index)")
            }
        }
        try store.sealActivePack()
        #expect(try store.statistics().packCount >= 3)
        let first = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(first.blobsRemoved == 600)
        #expect(first.packsRewritten == 0, "20% garbage is below the 50% threshold")
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).bytesCopied == 0)
    }

    /// A put writes its entry to the active pack before the index knows it. If the pack is sealed
    /// meanwhile and everything else in it is garbage, the index says it is dead: collection must
    /// wait for the put instead of deleting the pack under it.
    @Test func aPackWithAnInFlightPutIsNotJudged() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        var random = SeededRandom(seed: 1)
        _ = try store.put(random.bytes(30_000))  // garbage in the first pack

        // The first half of a put: bytes appended, index not yet told.
        let late = Data("arrives late".utf8)
        let digest = Digest.sha256(late)
        let placement = try late.withUnsafeBytes { payload in
            let header = PackFormat.entryHeader(digest: digest, compressed: false, rawLength: UInt32(payload.count), payload: payload, time: store.nowSeconds)
            let location = try store.packs.append(header: header, payload: payload, indexEntry: PackFormat.IndexEntry(
                digest: digest, offset: 0, rawLength: UInt32(payload.count), storedLength: UInt32(payload.count)))
            return LogRecord.BlobPlacement(digest: digest, location: location, compressed: false,
                                           rawLength: UInt32(payload.count), storedLength: UInt32(payload.count), time: store.nowSeconds)
        }
        try store.sealActivePack()

        let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved == 1)
        #expect(report.packsDeleted == 0, "the pack holds an entry the index does not know yet")
        #expect(FileManager.default.fileExists(atPath: store.packs.path(of: placement.location.pack)))

        // The second half of the put.
        try store.core.withLock { core in
            _ = try store.wal.append(.blobs([placement]))
            core.state.apply([placement])
        }
        store.packs.settle(placement.location.pack)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).packsRewritten == 1)
        #expect(try store.get(digest) == late)
        #expect(try store.verify(.init(readData: true)).problems == [])
    }

    /// A pack whose walk stops early at a damaged entry header must not be deleted: live blobs
    /// behind the damage were not copied.
    @Test func aDamagedPackIsKeptNotRewritten() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        var random = SeededRandom(seed: 2)
        let garbage = try (0 ..< 4).map { _ in try store.put(random.bytes(8000)) }
        let liveData = random.bytes(8000)
        let live = try store.put(liveData)
        try store.write { try $0.setRecord(Record(references: [live]), forKey: "live") }
        try store.sealActivePack()
        let location = try #require(store.core.withLock { $0.state.blobs[garbage[1]] }).location

        // Damage the header of a garbage entry in front of the live one (in place: the store has the file open).
        try flipBitInPlace(store.packs.path(of: location.pack), at: location.offset)
        let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved == 4)
        #expect(report.packsRewritten == 0)
        #expect(report.packsSkipped == 1)
        #expect(try store.get(live) == liveData)
    }

    /// The rewrite reads packs in 4 MiB chunks; entries larger than a chunk are read whole.
    @Test func rewritingCopiesEntriesLargerThanTheReadChunk() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.packSizeTarget = 16 << 20
        // Single entries larger than a read chunk: blobs this size are not chunked.
        configuration.chunkingThreshold = configuration.limits.maximumBlobSize
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 11)
        _ = try store.put(random.bytes(8 << 20))
        let small = random.bytes(1000)
        let big = random.bytes(5 << 20)
        let references = [try store.put(small), try store.put(big)]
        _ = try store.put(random.bytes(3 << 20))
        try store.write { try $0.setRecord(Record(references: references), forKey: "k") }
        try store.sealActivePack()

        let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved == 2)
        #expect(report.packsRewritten == 1)
        #expect(report.bytesCopied == UInt64(2 * PackFormat.entryHeaderSize + 1000 + (5 << 20)))
        #expect(try store.get(references[0]) == small)
        #expect(try store.get(references[1]) == big)
        #expect(try store.verify(.init(readData: true)).problems == [])
    }

    /// A crash between creating a pack file and writing its header leaves an empty file: leftover
    /// garbage, not damage.
    @Test func anEmptyPackLeftByACrashIsGarbageNotDamage() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try Store(at: dir.store, configuration: .testing())
            let digest = try store.put(Data("kept".utf8))
            try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
            try store.close()
        }
        let empty = dir.store.appendingPathComponent("packs").appendingPathComponent(PackFormat.fileName(0x99))
        #expect(FileManager.default.createFile(atPath: empty.path, contents: nil))
        let store = try Store(at: dir.store, configuration: .testing())
        #expect(try store.verify(.init(readData: true)).problems == [])
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).packsDeleted == 1)
        #expect(!FileManager.default.fileExists(atPath: empty.path))
    }

    @Test func periodicMaintenanceCollectsAndCheckpoints() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.garbageGracePeriod = .zero
        configuration.maintenanceInterval = .milliseconds(20)
        let store = try Store(at: dir.store, configuration: configuration)
        let digest = try store.put(Data("collected in the background".utf8))
        let checkpoints = dir.store.appendingPathComponent("checkpoint")
        #expect(waitUntil { !store.contains(digest) && ((try? files(in: checkpoints, withExtension: "ckpt").count) ?? 0) > 0 })
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(!reopened.contains(digest))
    }

    @Test func periodicMaintenanceStopsOnClose() throws {
        let dir = TemporaryDirectory()
        let clockReadings = Atomic<Int>(0)
        var configuration = Store.Configuration.testing()
        configuration.now = {
            clockReadings.add(1, ordering: .relaxed)
            return Date()
        }
        configuration.maintenanceInterval = .milliseconds(10)
        let store = try Store(at: dir.store, configuration: configuration)
        _ = try store.put(Data("young garbage: each run reads the clock to judge it".utf8))
        #expect(waitUntil { clockReadings.load(ordering: .relaxed) > 3 })
        try store.close()
        let afterClose = clockReadings.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.2)
        #expect(clockReadings.load(ordering: .relaxed) == afterClose, "no run after close()")
    }

    @Test func periodicMaintenanceDoesNotKeepAReleasedStoreAlive() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.maintenanceInterval = .milliseconds(5)
        weak var weakStore: Store?
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            weakStore = store
            _ = try store.put(Data("x".utf8))
            Thread.sleep(forTimeInterval: 0.05)  // let a few runs happen
        }
        // A run in progress holds the store until it ends; after that nothing does.
        #expect(waitUntil { weakStore == nil })
        // Released means closed (deinit may still be finishing): the lock becomes free for the next opener.
        #expect(waitUntil { (try? Store(at: dir.store, configuration: .testing())) != nil })
    }
}

// MARK: - Support

extension Store.Configuration {
    /// Small packs, so a few blobs spread over several, and collection has packs to rewrite.
    static func packed() -> Self {
        var configuration = Store.Configuration.testing()
        configuration.packSizeTarget = 1 << 16
        return configuration
    }
}

/// Polls `condition` until it holds or `timeout` passes: the timeout bounds only how long a failing
/// run takes, so a loaded machine does not fail a passing one.
func waitUntil(timeout: TimeInterval = 300, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.005)
    }
    return condition()
}

/// Flips the lowest bit of one byte with pwrite, keeping the inode (an open store keeps reading it).
func flipBitInPlace(_ path: String, at offset: UInt64) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: offset)
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: offset)
    try handle.write(contentsOf: [byte ^ 1])
}

/// Every file under a directory with its size and contents' digest, to prove nothing changed.
struct StoreFiles: Equatable {
    var files: [String: (size: Int, digest: Digest)]

    init(_ root: URL) throws {
        files = [:]
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
            let data = try Data(contentsOf: url)
            files[String(url.path.dropFirst(root.path.count))] = (data.count, Digest.sha256(data))
        }
    }

    var totalBytes: UInt64 { files.values.reduce(0) { $0 + UInt64($1.size) } }

    static func == (lhs: StoreFiles, rhs: StoreFiles) -> Bool {
        lhs.files.keys.sorted() == rhs.files.keys.sorted()
            && lhs.files.allSatisfy { key, value in rhs.files[key].map { $0.size == value.size && $0.digest == value.digest } ?? false }
    }
}

/// Incompressible blobs spread over several sealed packs, each referenced by its own record.
struct PackFixture {
    let store: Store
    private(set) var digests: [Digest] = []
    private(set) var contents: [Digest: Data] = [:]
    private(set) var released: [Digest] = []
    private(set) var kept: [Digest] = []
    /// Blobs by the pack holding them, in pack order.
    private(set) var byPack: [(pack: UInt32, digests: [Digest])] = []

    init(store: Store, blobs: Int = 96, size: Int = 6000) throws {
        self.store = store
        var random = SeededRandom(seed: 42)
        for index in 0 ..< blobs {
            let data = random.bytes(size)
            let digest = try store.put(data)
            digests.append(digest)
            contents[digest] = data
            try store.write { try $0.setRecord(Record(references: [digest]), forKey: "blob/\(index)") }
        }
        try store.sealActivePack()
        var packs: [UInt32: [Digest]] = [:]
        for digest in digests {
            let pack = try #require(store.core.withLock { $0.state.blobs[digest] }).location.pack
            packs[pack, default: []].append(digest)
        }
        byPack = packs.keys.sorted().map { ($0, packs[$0]!) }
    }

    /// Removes the records of every blob in the first `allOfPacks` packs and of all but one blob in
    /// the next `mostOfPacks`; the rest stay referenced. Returns the packs that should be deleted
    /// outright and the ones that should be rewritten.
    @discardableResult
    mutating func release(allOfPacks: Int, mostOfPacks: Int) throws -> (dead: [UInt32], rewritten: [UInt32]) {
        precondition(byPack.count > allOfPacks + mostOfPacks, "fixture too small")
        var releasing: Set<Digest> = []
        for (index, (_, digests)) in byPack.enumerated() {
            if index < allOfPacks {
                releasing.formUnion(digests)
            } else if index < allOfPacks + mostOfPacks {
                releasing.formUnion(digests.dropFirst())
            }
        }
        released = digests.filter { releasing.contains($0) }
        kept = digests.filter { !releasing.contains($0) }
        let keys = digests.enumerated().filter { releasing.contains($0.element) }.map { "blob/\($0.offset)" }
        try store.write { transaction in
            for key in keys { try transaction.removeRecord(forKey: key) }
        }
        return (byPack.prefix(allOfPacks).map(\.pack), byPack.dropFirst(allOfPacks).prefix(mostOfPacks).map(\.pack))
    }
}

extension Store {
    /// Seals the active pack, so collection may judge it.
    func sealActivePack() throws {
        try packs.sealActivePack()
    }
}

extension PackStore {
    /// Seals the active pack (trailing index, sync), so the next append starts a new one.
    func sealActivePack() throws {
        try state.withLock { state in
            guard let active = state.active else { return }
            try seal(active, in: &state)
        }
    }
}