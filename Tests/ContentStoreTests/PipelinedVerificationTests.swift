import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A verified read of a large compressed blob hashes what zstd has decoded while it decodes the rest
/// (issue 19): the same bytes hashed, the same damage refused (LargeValueTests' damage tests cover
/// the store's reads of compressed 1 MiB entries with it).
@Suite(.blocking) struct PipelinedVerificationTests {
    static func frame(of data: [UInt8]) throws -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: data.count)
        let length = try #require(data.withUnsafeBytes { source in frame.withUnsafeMutableBytes { Zstd.compress(source, into: $0, level: 3) } })
        return Array(frame[..<length])
    }

    /// Decodes `frame` into a buffer of `size` bytes in steps, collecting the stretches reported.
    static func decode(_ frame: [UInt8], size: Int, step: Int) throws -> (bytes: [UInt8], stretches: [Range<Int>]) {
        var output = [UInt8](repeating: 0, count: size)
        var stretches: [Range<Int>] = []
        try output.withUnsafeMutableBytes { destination in
            let base = UnsafeRawPointer(destination.baseAddress!)
            try frame.withUnsafeBytes { source in
                try Zstd.decompress(source, into: destination, inputStep: step) { stretch in
                    let start = base.distance(to: stretch.baseAddress!)
                    stretches.append(start ..< start + stretch.count)
                }
            }
        }
        return (output, stretches)
    }

    @Test(arguments: [4096, 40_000, 1 << 30])
    func stretchesCoverTheBlobInOrderOnce(step: Int) throws {
        var random = SeededRandom(seed: 31)
        let data = [UInt8](random.compressibleBytes(1 << 20))
        let (bytes, stretches) = try Self.decode(try Self.frame(of: data), size: data.count, step: step)
        #expect(bytes == data)
        #expect(stretches.first?.lowerBound == 0)
        #expect(stretches.last?.upperBound == data.count)
        for (previous, next) in zip(stretches, stretches.dropFirst()) { #expect(previous.upperBound == next.lowerBound) }
        if step == 4096 { #expect(stretches.count > 1, "decoded in several stretches") }
    }

    @Test func aTruncatedFrameBytesAfterItOrAnotherSizeAreRefused() throws {
        var random = SeededRandom(seed: 32)
        let data = [UInt8](random.compressibleBytes(600_000))
        let frame = try Self.frame(of: data)
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(Array(frame.dropLast(10)), size: data.count, step: 8192) }
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(frame + [0, 1, 2, 3], size: data.count, step: 8192) }
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(frame, size: data.count + 1, step: 8192) }
        #expect(throws: Zstd.DecompressionFailed.self) { try Self.decode(frame, size: data.count - 1, step: 8192) }
        var flipped = frame
        flipped[frame.count / 2] ^= 0x10
        let damaged = try? Self.decode(flipped, size: data.count, step: 8192)
        #expect(damaged?.bytes != data, "a flipped bit fails the frame or changes the bytes (the hash then refuses them)")
        // The context that met damage serves the next frame.
        #expect(try Self.decode(frame, size: data.count, step: 8192).bytes == data)
    }

    /// The helper, once no read that runs beside this test (tests run in parallel) holds it.
    static func claimWaiting() throws -> PipelinedHasher {
        for _ in 0 ..< 10_000 {
            if let hasher = PipelinedHasher.claim() { return hasher }
            usleep(1000)
        }
        throw StoreError(code: .io, message: "the read-verification helper stayed taken for 10 s")
    }

    @Test func theHelperHashesWhatItIsHandedAndIsHeldByOneReadAtATime() throws {
        var random = SeededRandom(seed: 33)
        let data = [UInt8](random.bytes(300_000))
        let hasher = try Self.claimWaiting()
        #expect(PipelinedHasher.claim() == nil)
        let digest = data.withUnsafeBytes { bytes in
            for start in stride(from: 0, to: bytes.count, by: 70_000) {
                hasher.update(UnsafeRawBufferPointer(rebasing: bytes[start ..< min(start + 70_000, bytes.count)]))
            }
            return hasher.finish()
        }
        #expect(digest == Digest.sha256(Data(data)))
        try Self.claimWaiting().cancel()  // released by finish
        try Self.claimWaiting().cancel()  // released by cancel
    }

    /// Reads at once: one holds the helper, the others hash on their own threads; all intact.
    @Test func concurrentVerifiedReadsOfCompressedBlobsReturnTheirBytes() async throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 0
        let store = try Store(at: dir.store, configuration: configuration)
        let values = (0 ..< 4).map { n -> Data in
            var random = SeededRandom(seed: 40 + UInt64(n))
            return random.compressibleBytes(1 << 20)
        }
        let digests = try values.map { try store.put($0) }
        for digest in digests { #expect(try #require(store.info(for: digest)).storedSize < 1 << 19) }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for round in 0 ..< 16 {
                let (value, digest) = (values[round % values.count], digests[round % values.count])
                group.addTask { try await store.get(digest) == value }
            }
            for try await intact in group { #expect(intact) }
        }
        try await store.close()
    }
}
