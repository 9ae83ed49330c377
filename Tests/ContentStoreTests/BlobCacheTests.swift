import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// The read cache: bounded, evicting by second chance, holding only verified bytes.
@Suite(.blocking) struct BlobCacheTests {
    /// The capacity that sixteen items of `size` bytes fill exactly.
    static func sixteenItems(of size: Int) -> Int { 16 * (size + BlobCache.itemOverhead) }

    /// A hit is served from memory, where the pack's damage cannot reach it; once the blob leaves the
    /// cache, the next get reads the pack again, re-hashes it and reports the damage.
    @Test(arguments: [true, false])
    func aCachedBlobIsTheVerifiedCopyAndPackDamageIsCaughtOnTheNextRead(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.verifiesReads = verifiesReads
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 1)
        let data = random.compressibleBytes(20_000)
        let digest = try store.put(data)
        #expect(try store.get(digest) == data)
        #expect(store.cache.blob(digest) == data, "a get keeps the verified blob")

        let entry = try #require(store.core.withLock { $0.state.blobs[digest] })
        try flipBitInPlace(store.packs.path(of: entry.location.pack),
                           at: entry.location.offset + UInt64(PackFormat.entryHeaderSize) + UInt64(entry.storedLength / 2))
        #expect(try store.get(digest) == data)
        store.cache.remove(digest)
        let error = try #require(throws: StoreError.self) { try store.get(digest) }
        #expect(error.code == .corrupted)
        #expect(error.offset == entry.location.offset)
        #expect(store.cache.blob(digest) == nil, "damaged bytes are never cached")
        try store.close()
    }

    /// While blobs fit they are kept decoded; once the cache is full, a blob whose entry is
    /// compressed well is kept as its frame (fewer bytes) and a hit decodes it from memory, while a
    /// blob that does not compress is kept as it is.
    @Test(arguments: [true, false])
    func aFullCacheKeepsAWellCompressedBlobAsItsFrameAndDecodesItOnAHit(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.verifiesReads = verifiesReads
        configuration.readCacheSize = Self.sixteenItems(of: 4096)
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 5)
        let text = random.compressibleBytes(4096), noise = random.bytes(4096)
        let textDigest = try store.put(text), noiseDigest = try store.put(noise)
        let entry = try #require(store.core.withLock { $0.state.blobs[textDigest] })
        #expect(entry.isCompressed)
        #expect(Double(entry.storedLength) <= Double(text.count) * BlobCache.compressedFormMaximumShare)

        #expect(try store.get(textDigest) == text)
        #expect(store.cache.bytes == text.count + BlobCache.itemOverhead, "room left: kept decoded")
        store.cache.remove(textDigest)
        let fillers = (0 ..< 16).map { _ in random.bytes(4096) }
        for filler in fillers { _ = try store.get(try store.put(filler)) }
        #expect(store.cache.bytes == Self.sixteenItems(of: 4096))

        #expect(try store.get(textDigest) == text)
        #expect(store.cache.blob(textDigest) == text)
        let withFrame = store.cache.bytes
        #expect(withFrame == Self.sixteenItems(of: 4096) - 4096 + Int(entry.storedLength), "full: the frame took one blob's room")
        #expect(try store.get(noiseDigest) == noise)
        #expect(store.cache.bytes <= Self.sixteenItems(of: 4096))
        #expect(store.cache.blob(noiseDigest) == noise, "kept decoded: it does not compress")

        // Served from the cached frame: damage to the pack after the read is not seen.
        try flipBitInPlace(store.packs.path(of: entry.location.pack),
                           at: entry.location.offset + UInt64(PackFormat.entryHeaderSize) + UInt64(entry.storedLength / 2))
        for _ in 0 ..< 3 { #expect(try store.get(textDigest) == text) }
        try store.close()
    }

    /// A frame that saves too little per hit (about half the blob, as 4 KiB of text gives) is not
    /// worth its room: once full, such a blob is still kept decoded, and a hit does not decode.
    @Test func aFullCacheKeepsABlobDecodedWhenItsFrameIsNotSmallEnough() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = Self.sixteenItems(of: 4096)
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 7)
        // Sixteen symbols, uniformly: four bits a byte, no repeats to match, so the frame is about half.
        let blob = Data(random.bytes(4096).map { 0x61 + $0 % 16 })
        let digest = try store.put(blob)
        let entry = try #require(store.core.withLock { $0.state.blobs[digest] })
        #expect(entry.isCompressed)
        #expect(Double(entry.storedLength) > Double(blob.count) * BlobCache.compressedFormMaximumShare)
        for _ in 0 ..< 16 { _ = try store.get(try store.put(random.bytes(4096))) }
        #expect(store.cache.bytes == Self.sixteenItems(of: 4096))

        #expect(try store.get(digest) == blob)
        #expect(store.cache.bytes == Self.sixteenItems(of: 4096), "full: the blob took a decoded blob's room, not a frame's")
        // A decoded hit does not touch the pack: damage after the read is not seen.
        try flipBitInPlace(store.packs.path(of: entry.location.pack),
                           at: entry.location.offset + UInt64(PackFormat.entryHeaderSize) + UInt64(entry.storedLength / 2))
        #expect(try store.get(digest) == blob)
        try store.close()
    }

    @Test func theCacheStaysWithinItsSizeAndSkipsLargeBlobs() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 64 << 10
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 2)
        let blobs = (0 ..< 100).map { _ in random.bytes(1024) }
        let digests = try blobs.map { try store.put($0) }
        for (digest, blob) in zip(digests, blobs) { #expect(try store.get(digest) == blob) }
        #expect(store.cache.bytes > 32 << 10)
        #expect(store.cache.bytes <= 64 << 10)

        let large = random.bytes(8 << 10)  // over a sixteenth of the cache
        let largeDigest = try store.put(large)
        #expect(try store.get(largeDigest) == large)
        #expect(store.cache.blob(largeDigest) == nil)
        try store.close()
    }

    @Test func aSizeOfZeroTurnsTheCacheOffAndANegativeOneIsRefused() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = -1
        #expect(throws: StoreError.self) { try Store(at: dir.store, configuration: configuration) }
        configuration.readCacheSize = 0
        let store = try Store(at: dir.store, configuration: configuration)
        let digest = try store.put(Data("small".utf8))
        #expect(try store.get(digest) == Data("small".utf8))
        #expect(store.cache.bytes == 0)
        try store.close()
    }

    /// Readers on several threads churn a cache far smaller than what they read: every get still
    /// returns its blob's bytes, and the cache stays within its size.
    @Test func concurrentGetsThroughASmallCacheReturnTheRightBytes() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 32 << 10
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 3)
        let blobs = (0 ..< 200).map { _ in random.compressibleBytes(1024 + Int(random.next() % 1024)) }
        let digests = try blobs.map { try store.put($0) }
        let mismatches = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var random = SeededRandom(seed: UInt64(10 + thread))
            for _ in 0 ..< 2000 {
                let index = Int(random.next() % UInt64(blobs.count))
                if (try? store.get(digests[index])) != blobs[index] { mismatches.add(1, ordering: .relaxed) }
            }
        }
        #expect(mismatches.load(ordering: .relaxed) == 0)
        #expect(store.cache.bytes <= 32 << 10)
        try store.close()
    }

    /// Thousands of gets through a cache of sixteen items, each miss inserting: every hit returns
    /// the blob of its own digest (the map follows each slot the ring's removals move), and the
    /// accounted bytes are exactly the held items'.
    @Test func churnThroughASmallCacheKeepsEveryDigestOnItsOwnBlob() {
        let cache = BlobCache(capacity: Self.sixteenItems(of: 103))
        let blobs = (0 ..< 500).map { Data(repeating: UInt8(truncatingIfNeeded: $0), count: 100) + Data("\($0)".utf8) }
        let digests = blobs.map { Digest.sha256($0) }
        var random = SeededRandom(seed: 9)
        var (hits, wrong) = (0, 0)
        for _ in 0 ..< 5000 {
            let index = Int(random.next() % UInt64(blobs.count))
            if let hit = cache.blob(digests[index]) {
                hits += 1
                if hit != blobs[index] { wrong += 1 }
            } else {
                cache.insert(blobs[index], for: digests[index])
            }
        }
        #expect(wrong == 0 && hits > 0, "\(wrong) of \(hits) hits returned another blob")
        let held = blobs.indices.filter { cache.blob(digests[$0]) == blobs[$0] }
        #expect(held.count >= 15)
        #expect(cache.bytes == held.reduce(0) { $0 + blobs[$1].count + BlobCache.itemOverhead })
    }

    @Test func evictionSparesABlobGotSinceTheHandLastPassed() {
        let cache = BlobCache(capacity: Self.sixteenItems(of: 100))
        let digests = (0 ..< 17).map { Digest.sha256(Data("blob \($0)".utf8)) }
        for digest in digests.prefix(16) { cache.insert(Data(repeating: 1, count: 100), for: digest) }
        #expect(cache.bytes == Self.sixteenItems(of: 100))
        #expect(cache.blob(digests[0]) != nil)  // used again: survives the next eviction
        cache.insert(Data(repeating: 2, count: 100), for: digests[16])
        #expect(cache.bytes == Self.sixteenItems(of: 100))
        #expect(cache.blob(digests[0]) != nil)
        #expect(cache.blob(digests[1]) == nil)
        #expect(cache.blob(digests[16]) == Data(repeating: 2, count: 100))
    }

    /// Issue 19: a MiB read once is not cached (it would push out what hits and churn a MiB of memory
    /// per read); read again, it is, and the third read is a hit that touches no pack.
    @Test func aLargeBlobIsAdmittedOnItsSecondRead() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 32 << 20
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 4)
        let large = random.bytes(1 << 20)
        let small = random.bytes(BlobCache.largeBlobMinimumSize - 1)
        let (largeDigest, smallDigest) = (try store.put(large), try store.put(small))
        #expect(try store.get(smallDigest) == small)
        #expect(store.cache.blob(smallDigest) == small, "below the threshold, the first read admits")
        #expect(try store.get(largeDigest) == large)
        #expect(store.cache.blob(largeDigest) == nil, "one read: only a ghost")
        #expect(try store.get(largeDigest) == large)
        #expect(store.cache.blob(largeDigest) == large, "the second read admits it")
        try store.close()
    }

    /// Ghosts hold at most the cache's bytes: a cycle over more large blobs than the cache holds is
    /// never admitted (each ghost is gone before its blob comes round again), one that fits is
    /// admitted on its second pass and hits from then on.
    @Test(arguments: [(blobs: 20, admitted: false), (blobs: 8, admitted: true)])
    func aCycleOfLargeBlobsIsAdmittedOnlyWhenItFits(blobs: Int, admitted: Bool) {
        let cache = BlobCache(capacity: 16_000, secondUseMinimumSize: 500)
        let digests = (0 ..< blobs).map { Digest.sha256(Data("large \($0)".utf8)) }
        for _ in 0 ..< 3 {
            for digest in digests where cache.blob(digest) == nil { cache.insert(Data(repeating: 7, count: 1000), for: digest) }
        }
        #expect(cache.bytes == (admitted ? blobs * (1000 + BlobCache.itemOverhead) : 0))
        #expect(digests.allSatisfy { (cache.blob($0) != nil) == admitted })
    }
}
