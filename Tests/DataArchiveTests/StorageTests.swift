import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// How the archive maps onto records and blobs, and what that buys.
@Suite struct StorageTests {
    let directory = TemporaryDirectory()

    @Test func aKeyIsOneRecordReferencingItsVersionsCurrentFirst() async throws {
        let store = try makeStore(directory)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        for index in 1 ... 3 { #expect(await archive.archiveAndWait("doc", bytes("v\(index)")).isSuccess) }
        let record = try #require(try await store.record(forKey: "dataarchive/doc"))
        #expect(record.value == Data([0x01, 0x02]))          // format 1, two archives
        #expect(record.references == ["v3", "v2", "v1"].map { Digest.sha256(bytes($0)) })
        #expect(try await store.keys(withPrefix: "") == ["dataarchive/doc"])
        #expect(await archive.keepAndWait(1, "doc").isSuccess)
        #expect(try await store.record(forKey: "dataarchive/doc")?.references == ["v3", "v2"].map { Digest.sha256(bytes($0)) })
    }

    @Test func versionListEncoding() throws {
        let digests = (0 ..< 301).map { Digest.sha256(bytes("\($0)")) }
        let record = VersionList(versions: digests).record
        #expect(record.value == Data([0x01, 0xAC, 0x02]))    // 300 archives, LEB128
        #expect(try VersionList(record: record, key: "k").versions == digests)
        #expect(VersionList(versions: [digests[0]]).record.value == Data([0x01, 0x00]))
        for (value, references) in [(Data(), 1), (Data([0x01]), 1), (Data([0x01, 0x80]), 1), (Data([0x01, 0x00, 0x00]), 1),
                                    (Data([0x01, 0x01]), 1), (Data([0x01, 0x00]), 0)] {
            #expect(throws: StoreError(code: .corrupted, message: "")) {
                try VersionList(record: Record(value: value, references: Array(digests.prefix(references))), key: "k")
            }
        }
        #expect(throws: StoreError(code: .unsupportedFormat, message: "")) {
            try VersionList(record: Record(value: Data([0x02, 0x00]), references: [digests[0]]), key: "k")
        }
    }

    @Test func identicalVersionsAndValuesAreStoredOnce() async throws {
        let store = try makeStore(directory)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        // 100 versions of 64 KiB, only 10 distinct contents.
        let contents = (0 ..< 10).map { seed in Data((0 ..< 65536).map { UInt8(truncatingIfNeeded: ($0 &* 31 &+ seed &* 7919) ^ ($0 >> 7)) }) }
        for index in 0 ..< 100 { archive.archiveCurrent(key: "doc", andSetNewData: contents[index % 10]) }
        // The same value under other keys.
        for key in ["x", "y", "z"] { archive.set(key: key, data: contents[0]) }
        #expect(archive.numberOfArchives(key: "doc") == 99)
        _ = archive.keys
        let statistics = try await store.statistics()
        #expect(statistics.blobCount == 10)
        #expect(statistics.logicalBytes == 10 * 65536)
        #expect(store.refCount(of: Digest.sha256(contents[0])) == 10 + 3)
        let (versions, result) = await archive.getAllAndWait("doc")
        #expect(result.isSuccess)
        #expect(versions == (0 ..< 100).reversed().map { contents[$0 % 10] })
    }

    /// Versions dropped by `keep(upTo:)` become garbage; a live reader's snapshot keeps what it may
    /// still read until it is done, and collection removes the rest.
    @Test func collectionRemovesDroppedVersionsButSparesLiveReaders() async throws {
        let clock = TestClock()
        let store = try makeStore(directory, clock: clock)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let versions = (1 ... 10).map { bytes("version \($0)") }
        for version in versions { archive.archiveCurrent(key: "doc", andSetNewData: version) }
        let dropped = versions[0 ..< 7].map(Digest.sha256)       // keep(upTo: 2) keeps 10 (current), 9, 8

        // A reader from before the drop.
        let early = try #require(await archive.readerAndWait("doc"))
        #expect(await archive.keepAndWait(2, "doc").isSuccess)
        for digest in dropped { #expect(store.refCount(of: digest) == 0) }
        clock.advance(seconds: 10)
        let spared = try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(spared.blobsRemoved == 0)
        let (earlyRead, earlyEnd) = await early.drain()
        #expect(earlyRead == versions.reversed())
        #expect(isLockingReaderWasFinished(earlyEnd))

        // A reader from after the drop: collection frees the dropped versions under it, and its own stay readable.
        let late = try #require(await archive.readerAndWait("doc"))
        let (first, _) = await late.nextAndWait()
        #expect(first == versions[9])
        clock.advance(seconds: 10)
        let collected = try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(collected.blobsRemoved == 7)
        for digest in dropped { #expect(!store.contains(digest)) }
        let (lateRest, lateEnd) = await late.drain()
        #expect(lateRest == [versions[8], versions[7]])
        #expect(isLockingReaderWasFinished(lateEnd))
        #expect(try await store.verify().isClean)
    }

    /// A reader that is not finished keeps everything it may read, even after the key is deleted.
    @Test func unfinishedReaderPinsUntilFinish() async throws {
        let clock = TestClock()
        let store = try makeStore(directory, clock: clock)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        for index in 1 ... 3 { archive.archiveCurrent(key: "doc", andSetNewData: bytes("v\(index)")) }
        let reader = try #require(await archive.readerAndWait("doc"))
        #expect(await archive.deleteAndWait("doc").isSuccess)
        clock.advance(seconds: 10)
        #expect(try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 0)
        #expect(text(await reader.nextAndWait().0) == "v3")
        reader.finish()
        #expect(reader.isFinished)
        #expect(isLockingReaderWasFinished(await reader.nextAndWait().1))
        clock.advance(seconds: 10)
        #expect(try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 3)
    }

    /// What an outside writer does to the key while a value read is between looking it up and reading its blob.
    enum OutsideChange: CaseIterable, Sendable {
        case replaced, removed
    }

    /// A value read takes no snapshot pin (`Store.readLatest`), so a writer outside the archive
    /// (sharing its store) and a collection can take the blob it looked up before it reads it. The
    /// read then runs again on a snapshot and returns what the key holds by then, the newer value or
    /// none: never the old bytes from a collected blob, never a `notFound` failure.
    @Test(arguments: OutsideChange.allCases)
    func aValueCollectedWhileBeingReadIsReadAgain(change: OutsideChange) async throws {
        let clock = TestClock()
        let newer = bytes("newer")
        let armed = Mutex(false)
        let collected = Mutex<[Int]>([])
        var configuration = Store.Configuration()
        configuration.durability = .none
        configuration.now = { clock.now }
        configuration.afterTakingUnpinnedView = { store in
            guard armed.withLock({ armed in
                defer { armed = false }
                return armed
            }) else { return }
            do {
                try store.write { transaction in
                    switch change {
                    case .replaced:
                        let digest = try store.put(newer)
                        try transaction.setRecord(VersionList(versions: [digest]).record, forKey: "dataarchive/doc")
                    case .removed:
                        try transaction.removeRecord(forKey: "dataarchive/doc")
                    }
                }
                clock.advance(seconds: 10)
                let removed = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved
                collected.withLock { $0.append(removed) }
            } catch {
                Issue.record(error, "the outside change failed")
            }
        }
        let store = try Store(at: directory.store, configuration: configuration)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let expected = change == .replaced ? newer : nil

        // Through the callback API and the async one, each read with a fresh value to collect.
        #expect(await archive.setAndWait("doc", bytes("older 1")).isSuccess)
        armed.withLock { $0 = true }
        let (got, result) = await archive.getAndWait("doc")
        #expect(result.isSuccess)
        #expect(got == expected)

        #expect(await archive.setAndWait("doc", bytes("older 2")).isSuccess)
        armed.withLock { $0 = true }
        #expect(try await archive.data(forKey: "doc") == expected)

        // Each read ran into the change, and the collection took the blob it had looked up.
        #expect(collected.withLock { $0 } == [1, 1])
        #expect(!store.contains(Digest.sha256(bytes("older 1"))) && !store.contains(Digest.sha256(bytes("older 2"))))
    }

    @Test func instancesForOneRootShareTheStoreAndItOutlivesThem() async throws {
        do {
            let first = DataArchive(rootUrl: directory.url)
            let second = DataArchive(rootUrl: directory.url)
            #expect(await first.setAndWait("doc", bytes("one")).isSuccess)
            #expect(await second.archiveAndWait("doc", bytes("two")).isSuccess)
            #expect(await first.getAllAndWait("doc").0.map(text) == ["two", "one"])
        }
        // Both instances are gone (their store closed); a new one opens it again at once.
        for round in 0 ..< 20 {
            let archive = DataArchive(rootUrl: directory.url)
            let result = await archive.archiveAndWait("doc", bytes("round \(round)"))
            #expect(result.isSuccess, "\(result)")
        }
        let archive = DataArchive(rootUrl: directory.url)
        #expect(archive.numberOfArchives(key: "doc") == 21)
        // An archive over the store object it already uses shares it too.
        let store = try archive.engine.store()
        #expect(await DataArchive(store: store).getAndWait("doc").0 == bytes("round 19"))
    }
}
