import Foundation
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct BlobTests {
    enum Content: String, CaseIterable, Sendable {
        case empty, oneByte, randomMiB, compressible10MiB
        func data() -> Data {
            var random = SeededRandom(seed: 42)
            switch self {
            case .empty: return Data()
            case .oneByte: return Data([0x5A])
            case .randomMiB: return random.bytes(1 << 20)
            case .compressible10MiB: return random.compressibleBytes(10 << 20)
            }
        }
    }

    @Test(arguments: Content.allCases)
    func roundTrip(content: Content) throws {
        let dir = TemporaryDirectory()
        let data = content.data()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(data)
        #expect(digest == Digest.sha256(data))
        #expect(try store.get(digest) == data)
        #expect(store.contains(digest))
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        let read = try reopened.get(digest)
        #expect(read == data)
        #expect(read.startIndex == 0)
        #expect(reopened.info(for: digest)?.size == data.count)
    }

    /// The facades' put of bytes they have just hashed stores what `put(_:)` stores, above the
    /// chunking threshold too, and a second put of the same bytes writes nothing.
    @Test(arguments: [Content.oneByte, .randomMiB, .compressible10MiB])
    func putWithAKnownDigestStoresTheSameBlob(content: Content) throws {
        let dir = TemporaryDirectory()
        let data = content.data()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(data, knownDigest: Digest.sha256(data))
        #expect(digest == Digest.sha256(data))
        let stored = try store.statistics().storedBytes
        #expect(try store.put(data) == digest)
        #expect(try store.put(data, knownDigest: digest) == digest)
        #expect(try store.statistics().storedBytes == stored)
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(try reopened.get(digest) == data)
    }

    @Test func sameBytesAreStoredOnce() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 7)
        let data = random.bytes(256 * 1024)
        let first = try store.put(data)
        let before = try store.statistics()
        let second = try store.put(data)
        let after = try store.statistics()
        #expect(first == second)
        #expect(after.blobCount == 1)
        #expect(after.storedBytes == before.storedBytes)
        #expect(after.logicalBytes == UInt64(data.count))
    }

    @Test func compressibleBlobsAreCompressedAndRandomOnesStoredRaw() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 9)
        let text = try store.put(random.compressibleBytes(1 << 20))
        let noise = try store.put(random.bytes(1 << 20))
        let textInfo = try #require(store.info(for: text))
        let noiseInfo = try #require(store.info(for: noise))
        #expect(textInfo.storedSize < textInfo.size / 2)
        #expect(noiseInfo.storedSize == noiseInfo.size + PackFormat.entryHeaderSize)
    }

    @Test func unknownDigestIsNotFound() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        #expect(throws: StoreError.code(.notFound)) { try store.get(Digest.sha256(Data("absent".utf8))) }
        #expect(!store.contains(Digest.sha256(Data("absent".utf8))))
        #expect(store.refCount(of: Digest.sha256(Data("absent".utf8))) == 0)
        #expect(store.info(for: Digest.sha256(Data("absent".utf8))) == nil)
    }

    @Test(arguments: [true, false])
    func damagedPackEntryIsCorruptedNeverWrongBytes(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.verifiesReads = verifiesReads
        var random = SeededRandom(seed: 11)
        let blobs = (0 ..< 3).map { _ in random.compressibleBytes(50_000) }
        let digests: [Digest]
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            digests = try blobs.map { try store.put($0) }
            // Past the WAL that carried the pack's bytes (recovery would write them back over the damage).
            try store.checkpoint()
            try store.close()
        }
        let pack = try #require(try files(in: dir.store.appendingPathComponent("packs"), withExtension: "pack").first)
        let store = try Store(at: dir.store, configuration: configuration)
        let entry = try #require(store.core.withLock { $0.state.blobs[digests[1]] })
        try store.close()
        // One bit in the middle of the second blob's payload.
        try flipBit(in: pack, at: Int(entry.location.offset) + PackFormat.entryHeaderSize + Int(entry.storedLength) / 2, bit: 3)
        let damaged = try Store(at: dir.store, configuration: configuration)
        #expect(try damaged.get(digests[0]) == blobs[0])
        #expect(try damaged.get(digests[2]) == blobs[2])
        let error = try #require(throws: StoreError.self) { try damaged.get(digests[1]) }
        #expect(error.code == .corrupted)
        #expect(error.path == pack.path)
        #expect(error.offset == entry.location.offset)
        let report = try damaged.verify(.init(readData: true))
        #expect(report.problems.map(\.digest) == [digests[1]])
    }

    @Test func fileImportAndExport() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 5)
        let data = random.bytes(300_000)
        let source = dir.url.appendingPathComponent("source.bin")
        try data.write(to: source)
        let digest = try store.put(contentsOf: source)
        #expect(digest == Digest.sha256(data))
        let target = dir.url.appendingPathComponent("out.bin")
        try store.export(digest, to: target)
        #expect(try Data(contentsOf: target) == data)
        #expect(throws: StoreError.code(.io)) { try store.put(contentsOf: dir.url.appendingPathComponent("missing")) }
    }

    /// Blobs put from a file are read after room for their header and written from there; they
    /// must land in the pack byte for byte as the same blobs put from memory.
    @Test(arguments: [(10_000, false), (10_000, true), (300_000, false), (300_000, true), (1 << 20, false)])
    func filePutsWriteTheSameEntryAsMemoryPuts(size: Int, compressible: Bool) throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 11)
        let data = compressible ? random.compressibleBytes(size) : random.bytes(size)
        let source = dir.url.appendingPathComponent("source.bin")
        try data.write(to: source)
        let clock = TestClock()
        let fromFile = try Store(at: dir.url.appendingPathComponent("file"), configuration: .testing(clock: clock))
        let fromMemory = try Store(at: dir.url.appendingPathComponent("memory"), configuration: .testing(clock: clock))
        let digest = try fromFile.put(contentsOf: source)
        #expect(try fromMemory.put(data) == digest)
        let info = try #require(fromFile.info(for: digest))
        #expect(info == fromMemory.info(for: digest))
        #expect(compressible ? info.storedSize < size / 2 : info.storedSize == size + PackFormat.entryHeaderSize)
        #expect(try fromFile.get(digest) == data)
        try fromFile.close()
        try fromMemory.close()
        let entries = try ["file", "memory"].map { name in
            let pack = try Data(contentsOf: dir.url.appendingPathComponent("\(name)/packs/\(PackFormat.fileName(1))"))
            return pack[PackFormat.headerSize ..< PackFormat.headerSize + info.storedSize]
        }
        #expect(entries[0] == entries[1])
        let reopened = try Store(at: dir.url.appendingPathComponent("file"), configuration: .testing())
        #expect(try reopened.get(digest) == data)
        #expect(try reopened.verify(.init(readData: true)).isClean)
    }

    @Test func packsRollOverAtTheSizeTarget() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.packSizeTarget = 1 << 16
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 3)
        let blobs = (0 ..< 20).map { _ in random.bytes(10_000) }
        let digests = try blobs.map { try store.put($0) }
        #expect(try store.statistics().packCount >= 3)
        try store.close()
        let reopened = try Store(at: dir.store, configuration: configuration)
        for (digest, blob) in zip(digests, blobs) { #expect(try reopened.get(digest) == blob) }
        // Sealed packs carry their own index, matching the entries.
        let packFiles = try files(in: dir.store.appendingPathComponent("packs"), withExtension: "pack")
        let sealed = try FileSystem(io: SystemFileIO()).open(packFiles[0].path, flags: 0)
        let indexOffset = try #require(try PackReader.sealedIndexOffset(of: sealed, size: try sealed.size()))
        let entries = try PackReader.entries(of: sealed)
        #expect(!entries.isEmpty)
        #expect(entries.last.map { $0.offset + $0.header.totalLength } == indexOffset)
        #expect(try reopened.verify(.init(readData: true)).isClean)
    }
}

@Suite(.blocking) struct BlobImportTests {
    @Test func importFollowsTheCallersSymlinks() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let target = dir.url.appendingPathComponent("real.bin")
        try Data("linked bytes".utf8).write(to: target)
        let link = dir.url.appendingPathComponent("link.bin")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(try store.put(contentsOf: link) == Digest.sha256(Data("linked bytes".utf8)))
    }

    @Test func rewritingARecordUnchangedCommitsNothing() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let record = Record(value: Data("same".utf8))
        try store.write { try $0.setRecord(record, forKey: "k") }
        let before = store.wal.appendedLSN
        try store.write { try $0.setRecord(record, forKey: "k") }
        #expect(store.wal.appendedLSN == before)
        #expect(try store.record(forKey: "k") == record)
    }
}

@Suite(.blocking) struct NoOpTransactionTests {
    @Test func anUnchangedRewriteReturnsOnlyOnceWhatItSawIsDurable() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: .full))
        let record = Record(value: Data("v".utf8))
        // Applied but not yet flushed, as another writer's commit is while its leader syncs.
        try store.core.withLock { core in
            let commit = LogRecord.Commit(sequence: core.state.commitSequence + 1, time: 0, changes: [.init(key: "k", record: record)])
            _ = try store.wal.append(.commit(commit))
            try core.state.apply(commit)
        }
        let pending = store.wal.appendedLSN
        #expect(store.wal.durableLSN < pending)
        try store.write { try $0.setRecord(record, forKey: "k") }
        #expect(store.wal.durableLSN >= pending, "the no-op write returned before the commit it rewrote was durable")
    }
}
