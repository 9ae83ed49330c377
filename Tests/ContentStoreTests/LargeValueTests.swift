import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Large whole blobs (issue 19's megabyte values): the compression probe that stores them raw when
/// they barely compress, the in-place read of raw entries, and one test per claim of
/// Docs/durability.md's "What each read detects".
@Suite(.blocking) struct LargeValueTests {
    /// A blob of `size` bytes whose probe samples (``LocalEngine/compressionProbeSamples`` evenly
    /// spread stretches of ``LocalEngine/compressionProbeSampleSize``) are random and whose other
    /// bytes are zeros: it compresses well, but not where the probe looks.
    static func randomWhereProbed(_ size: Int, seed: UInt64) -> Data {
        var random = SeededRandom(seed: seed)
        var data = Data(count: size)
        let (count, sample) = (LocalEngine.compressionProbeSamples, LocalEngine.compressionProbeSampleSize)
        let step = (size - sample) / (count - 1)
        for index in 0 ..< count { data.replaceSubrange(index * step ..< index * step + sample, with: random.bytes(sample)) }
        return data
    }

    @Test func aLargeBlobWhoseSamplesDoNotCompressIsStoredRawWithoutTrying() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let data = Self.randomWhereProbed(1 << 20, seed: 1)
        let digest = try store.put(data)
        let info = try #require(store.info(for: digest))
        // Compressed, three quarters of zeros would shrink to about the random quarter.
        #expect(info.storedSize == data.count + PackFormat.entryHeaderSize)
        #expect(try store.get(digest) == data)
    }

    @Test func aBlobBelowTheProbeSizeIsAlwaysCompressedWhenThatHelps() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let data = Self.randomWhereProbed(LocalEngine.compressionProbeMinimumSize - 1, seed: 2)
        let digest = try store.put(data)
        let info = try #require(store.info(for: digest))
        #expect(info.storedSize < data.count * 3 / 4)
        #expect(try store.get(digest) == data)
    }

    @Test func aLargeBlobCompressibleInOneSampleOnlyIsCompressed() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 3)
        // Random but for its first quarter, text: the samples save well over the minimum gain.
        var data = random.bytes(1 << 20)
        data.replaceSubrange(0 ..< (256 << 10), with: random.compressibleBytes(256 << 10))
        let digest = try store.put(data)
        let info = try #require(store.info(for: digest))
        #expect(info.storedSize < data.count - (128 << 10))
        #expect(try store.get(digest) == data)
    }

    @Test(arguments: [true, false])
    func aLargeRawEntryIsReadInPlaceAndRoundTrips(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.verifiesReads = verifiesReads
        configuration.readCacheSize = 0
        var random = SeededRandom(seed: 4)
        let sizes = [Int(PackReader.inPlaceReadMinimumSize) - 1, Int(PackReader.inPlaceReadMinimumSize), 1 << 20]
        let blobs = sizes.map { random.bytes($0) }
        let store = try Store(at: dir.store, configuration: configuration)
        let digests = try blobs.map { try store.put($0) }
        for (digest, blob) in zip(digests, blobs) {
            let read = try store.get(digest)
            #expect(read == blob)
            #expect(read.startIndex == 0)
        }
        try store.close()
        let reopened = try Store(at: dir.store, configuration: configuration)
        for (digest, blob) in zip(digests, blobs) { #expect(try reopened.get(digest) == blob) }
    }

    @Test func theInPlaceReadRefusesACompressedEntryWithATypedError() throws {
        let dir = TemporaryDirectory()
        let (_, digests, entry, pack) = try Self.threeBlobs(.compressed, in: dir)
        let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: true))
        let file = try #require(try store.packs.file(entry.location.pack))
        let error = try #require(throws: StoreError.self) {
            try PackReader.readRawEntry(from: file, at: entry.location.offset, expected: LocalEngine.expected(digests[1], entry),
                                        verify: true, limits: Store.Limits())
        }
        #expect(error.code == .corrupted)
        #expect(error.path == pack.path)
        #expect(error.offset == entry.location.offset)
    }

    // MARK: What each read detects (Docs/durability.md)

    enum Kind: String, CaseIterable, Sendable { case raw, compressed }

    /// Where in an entry damage is made.
    enum Place: Sendable { case payloadMiddle, payloadLastByte, headerDigest, headerPutTime, headerChecksum }

    /// A store holding three 1 MiB blobs of `kind`, closed after a checkpoint (so no WAL carries
    /// the pack bytes back over the damage); the blobs, digests and the middle one's entry.
    private static func threeBlobs(_ kind: Kind, in dir: TemporaryDirectory) throws -> ([Data], [Digest], BlobEntry, URL) {
        var random = SeededRandom(seed: 21)
        let blobs = (0 ..< 3).map { _ in kind == .raw ? random.bytes(1 << 20) : random.compressibleBytes(1 << 20) }
        let store = try Store(at: dir.store, configuration: .testing())
        let digests = try blobs.map { try store.put($0) }
        try store.checkpoint()
        let entry = try #require(store.core.withLock { $0.state.blobs[digests[1]] })
        #expect(entry.isCompressed == (kind == .compressed))
        try store.close()
        let pack = try #require(try files(in: dir.store.appendingPathComponent("packs"), withExtension: "pack").first)
        return (blobs, digests, entry, pack)
    }

    private static func offset(of place: Place, in entry: BlobEntry) -> Int {
        let start = Int(entry.location.offset)
        switch place {
        case .payloadMiddle: return start + PackFormat.entryHeaderSize + Int(entry.storedLength) / 2
        case .payloadLastByte: return start + PackFormat.entryHeaderSize + Int(entry.storedLength) - 1
        case .headerDigest: return start + 8 + 5
        case .headerPutTime: return start + 48
        case .headerChecksum: return start + 52
        }
    }

    private static func configuration(verifiesReads: Bool) -> Store.Configuration {
        var configuration = Store.Configuration.testing()
        configuration.verifiesReads = verifiesReads
        configuration.readCacheSize = 0
        return configuration
    }

    /// Claim: every read of a blob's bytes from its pack, in either mode, raises `corrupted` (naming
    /// the pack and the entry's offset) for a changed bit anywhere in the stored bytes, raw or
    /// compressed, and in the digest the entry's header names; the other blobs still read.
    @Test(arguments: Kind.allCases, [true, false])
    func aFlippedBitInTheStoredBytesFailsEveryRead(kind: Kind, verifiesReads: Bool) throws {
        for place in [Place.payloadMiddle, .payloadLastByte, .headerDigest] {
            let dir = TemporaryDirectory()
            let (blobs, digests, entry, pack) = try Self.threeBlobs(kind, in: dir)
            try flipBit(in: pack, at: Self.offset(of: place, in: entry), bit: 5)
            let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: verifiesReads))
            #expect(try store.get(digests[0]) == blobs[0])
            #expect(try store.get(digests[2]) == blobs[2])
            let error = try #require(throws: StoreError.self, "\(place)") { try store.get(digests[1]) }
            #expect(error.code == .corrupted)
            #expect(error.path == pack.path)
            #expect(error.offset == entry.location.offset)
        }
    }

    /// Claim: without `verifiesReads`, the entry's CRC32C detects any damage of at most 32
    /// consecutive bits: four bytes overwritten with other bytes fail the read.
    @Test(arguments: Kind.allCases)
    func aDamagedWordFailsTheChecksummedRead(kind: Kind) throws {
        let dir = TemporaryDirectory()
        let (_, digests, entry, pack) = try Self.threeBlobs(kind, in: dir)
        var bytes = try Data(contentsOf: pack)
        let at = Self.offset(of: .payloadMiddle, in: entry)
        for index in at ..< at + 4 { bytes[index] = ~bytes[index] &+ UInt8(index & 0x3F) }
        try bytes.write(to: pack)
        let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: false))
        #expect(throws: StoreError.code(.corrupted)) { try store.get(digests[1]) }
    }

    /// Claim: without `verifiesReads`, damage to the header fields that do not change the bytes
    /// (the put time, the checksum itself) fails the read too: the CRC32C covers the header.
    @Test(arguments: Kind.allCases, [Place.headerPutTime, .headerChecksum])
    func headerDamageFailsTheChecksummedRead(kind: Kind, place: Place) throws {
        let dir = TemporaryDirectory()
        let (_, digests, entry, pack) = try Self.threeBlobs(kind, in: dir)
        try flipBit(in: pack, at: Self.offset(of: place, in: entry), bit: 1)
        let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: false))
        #expect(throws: StoreError.code(.corrupted)) { try store.get(digests[1]) }
    }

    /// Claim: with `verifiesReads`, a read checks what it returns, the bytes' SHA-256, and not the
    /// entry's checksum: damage that leaves the blob's bytes intact (the put time) returns the
    /// right bytes; `verify` with `readData` checks the CRC32C too and reports the entry.
    @Test(arguments: Kind.allCases)
    func theVerifiedReadReturnsIntactBytesDespiteHeaderDamage(kind: Kind) throws {
        let dir = TemporaryDirectory()
        let (blobs, digests, entry, pack) = try Self.threeBlobs(kind, in: dir)
        try flipBit(in: pack, at: Self.offset(of: .headerPutTime, in: entry), bit: 1)
        let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: true))
        #expect(try store.get(digests[1]) == blobs[1])
        let problems = try store.verify(.init(readData: true)).problems
        #expect(problems.map(\.digest) == [digests[1]])
        #expect(problems.first?.kind == "blobData")
        #expect(problems.first?.path == pack.path)
        #expect(problems.first?.offset == entry.location.offset)
        #expect(problems.first?.message.contains("CRC32C") == true)
    }

    /// Claim: a pack cut short inside an entry fails its read, in either mode, naming the pack.
    @Test(arguments: Kind.allCases, [true, false])
    func aTruncatedEntryFailsTheRead(kind: Kind, verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        let (_, digests, entry, pack) = try Self.threeBlobs(kind, in: dir)
        let handle = try FileHandle(forWritingTo: pack)
        try handle.truncate(atOffset: UInt64(Self.offset(of: .payloadMiddle, in: entry)))
        try handle.close()
        let store = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: verifiesReads))
        let error = try #require(throws: StoreError.self) { try store.get(digests[1]) }
        #expect(error.code == .corrupted)
        #expect(error.path == pack.path)
    }

    /// Claim: the read cache serves a blob it holds without reading the pack again, so damage made
    /// after a blob was read and cached is seen only once the blob leaves the cache (or by `verify`).
    @Test func theReadCacheServesWhatPassedWhenItWasRead() throws {
        let dir = TemporaryDirectory()
        let (blobs, digests, entry, pack) = try Self.threeBlobs(.raw, in: dir)
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 32 << 20
        let store = try Store(at: dir.store, configuration: configuration)
        // A MiB is admitted on its second read (BlobCache.secondUseMinimumSize).
        #expect(try store.get(digests[1]) == blobs[1])
        #expect(try store.get(digests[1]) == blobs[1])
        try flipBit(in: pack, at: Self.offset(of: .payloadMiddle, in: entry), bit: 5)
        #expect(try store.get(digests[1]) == blobs[1])
        #expect(try store.verify(.init(readData: true)).problems.map(\.digest) == [digests[1]])
        store.cache.remove(digests[1])
        #expect(throws: StoreError.code(.corrupted)) { try store.get(digests[1]) }
    }
}
