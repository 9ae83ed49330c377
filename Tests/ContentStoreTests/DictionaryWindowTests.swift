import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Small frames made with a dictionary decode in a window that holds the dictionary right before the
/// output (``Zstd``'s contiguous-prefix decode): the same bytes as zstd's own decode with the
/// dictionary elsewhere, whichever way a decode goes, and damage still fails the read.
@Suite(.blocking) struct DictionaryWindowTests {
    static let blockSize = 4096

    /// A dictionary trained on 256 text blocks, as the engine trains its small-blob dictionary, and
    /// frames of `blocks` other blocks of the same text made with it.
    static func framesWithADictionary(_ blocks: Int, size: Int = blockSize) throws
        -> (dictionary: Zstd.DecompressionDictionary, blocks: [Data], frames: [[UInt8]]) {
        let text = ChunkDictionaryTests.text((256 + blocks) * size, seed: 7)
        let trained = try #require([UInt8](text.prefix(256 * size)).withUnsafeBytes { joined in
            let samples = (0 ..< 256).map { UnsafeRawBufferPointer(rebasing: joined[$0 * size ..< ($0 + 1) * size]) }
            return Zstd.trainDictionary(samples: samples, capacity: LocalEngine.smallBlobDictionarySize, level: 3)
        })
        let compressor = try #require(Zstd.CompressionDictionary(trained, level: 3, smallInputs: size,
                                                                 minimumMatch: LocalEngine.smallBlobMinimumMatch))
        let decompressor = try #require(trained.withUnsafeBytes { Zstd.DecompressionDictionary($0) })
        let measured = (256 ..< 256 + blocks).map { text.subdata(in: $0 * size ..< ($0 + 1) * size) }
        let frames = try measured.map { block in
            try #require(block.withUnsafeBytes { Zstd.compress($0, dictionary: compressor, limit: size) })
        }
        return (decompressor, measured, frames)
    }

    static func decode(_ frame: [UInt8], count: Int, with dictionary: Zstd.DecompressionDictionary) throws -> Data {
        var output = Data(count: count)
        try output.withUnsafeMutableBytes { destination in
            try frame.withUnsafeBytes { try Zstd.decompress($0, into: destination, dictionary: dictionary) }
        }
        return output
    }

    /// Every frame decodes to its block, one after another through the same window: a decode that
    /// wrote over the window's copy of the dictionary would spoil the ones after it.
    @Test func smallFramesDecodeToTheirBlocksOneAfterAnother() throws {
        let (dictionary, blocks, frames) = try Self.framesWithADictionary(300)
        for (block, frame) in zip(blocks, frames) {
            #expect(try Self.decode(frame, count: block.count, with: dictionary) == block)
        }
    }

    /// More threads than windows decode at once: those that find every window busy decode with
    /// the dictionary elsewhere, and every decode returns its block.
    @Test func moreConcurrentDecodesThanWindowsAllReturnTheirBlocks() throws {
        let (dictionary, blocks, frames) = try Self.framesWithADictionary(200)
        let threads = 2 * Zstd.DecompressionDictionary.windowsPerDictionary + 1
        let mismatches = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0 ..< 5 {
                for index in stride(from: (thread + round) % blocks.count, to: blocks.count, by: 3)
                where (try? Self.decode(frames[index], count: blocks[index].count, with: dictionary)) != blocks[index] {
                    mismatches.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(mismatches.load(ordering: .relaxed) == 0)
    }

    /// Outputs longer than a window's room decode the usual way.
    @Test func aFrameLongerThanAWindowDecodesTheUsualWay() throws {
        let size = 2 * Zstd.DecompressionDictionary.windowOutputCapacity
        let (dictionary, blocks, frames) = try Self.framesWithADictionary(3, size: size)
        for (block, frame) in zip(blocks, frames) {
            #expect(try Self.decode(frame, count: size, with: dictionary) == block)
        }
    }

    /// A truncated frame, or one asked for another length, fails in the window, and the window
    /// decodes the next frame right.
    @Test func aDamagedFrameFailsAndTheWindowStillDecodesTheNext() throws {
        let (dictionary, blocks, frames) = try Self.framesWithADictionary(2)
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(Array(frames[0].dropLast(40)), count: blocks[0].count, with: dictionary) }
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(frames[0], count: blocks[0].count - 1, with: dictionary) }
        #expect(try Self.decode(frames[1], count: blocks[1].count, with: dictionary) == blocks[1])
    }

    /// One flipped bit in a small blob's frame (made with the store's dictionary, so decoded in a
    /// window): the read is `corrupted` naming the blob's pack and offset, with or without
    /// re-hashing, and the read cache keeps nothing of it.
    @Test(arguments: [false, true])
    func aFlippedBitInASmallFrameIsCorruptedNeverWrongBytes(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        let (blocks, digests) = try SmallBlobDictionaryTests.storeWithABlobAfterTheSample(dir)
        let entry = try SmallBlobDictionaryTests.packEntry(dir, digests.last!)
        #expect(entry.header.usesDictionary)
        try flipBit(in: URL(fileURLWithPath: entry.path), at: Int(entry.offset) + PackFormat.entryHeaderSize + entry.payload.count / 2, bit: 3)

        var configuration = SmallBlobDictionaryTests.configuration(verifiesReads: verifiesReads)
        configuration.readCacheSize = 1 << 20
        let reopened = try Store(at: dir.store, configuration: configuration)
        let error = try #require(throws: StoreError.self) { try reopened.get(digests.last!) }
        #expect(error.code == .corrupted)
        #expect(error.path == entry.path && error.offset == entry.offset, "\(error.message)")
        #expect(reopened.cache.blob(digests.last!) == nil)
        #expect(try reopened.get(digests[0]) == blocks[0])
        try reopened.close()
    }
}
