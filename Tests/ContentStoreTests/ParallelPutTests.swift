internal import CZstd
import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// The large whole-blob put on two cores (issue 19): the digest computed on the helper while the
/// caller probes, and compression by zstd's workers into one ordinary frame (Docs/on-disk-format.md).
@Suite(.blocking) struct ParallelPutTests {
    /// Sizes around the probe's minimum and the parallel job size, up to the largest whole blob.
    static let sizes = [LocalEngine.compressionProbeMinimumSize - 1, LocalEngine.compressionProbeMinimumSize,
                        Zstd.parallelJobSize, Zstd.parallelJobSize + 1, 1 << 20]

    @Test(arguments: sizes, [true, false])
    func aLargePutStoresItsBytesUnderTheirSHA256(size: Int, compressible: Bool) throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.readCacheSize = 0
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: UInt64(size))
        let data = compressible ? random.compressibleBytes(size) : random.bytes(size)
        let digest = try store.put(data)
        #expect(digest == Digest.sha256(data))
        let info = try #require(store.info(for: digest))
        if compressible {
            #expect(info.storedSize < size / 2)
        } else {
            #expect(info.storedSize == size + PackFormat.entryHeaderSize)
        }
        #expect(try store.get(digest) == data)
        // Put again: found by the digest the helper computed, nothing written.
        let stored = try store.statistics().storedBytes
        #expect(try store.put(data) == digest)
        #expect(try store.statistics().storedBytes == stored)
        #expect(try store.verify(VerificationOptions(readData: true)).problems.isEmpty)
        try store.close()
    }

    /// Known answer for the frame the workers make: one standard zstd frame (magic 28 B5 2F FD),
    /// declaring the whole content size, that the plain single-call decoder restores. (A test running
    /// beside this one may hold the workers; the frame is then made on this thread, with the same
    /// properties.)
    @Test func aParallelFrameIsOneStandardFrame() throws {
        #expect(Zstd.compressesInParallel, "Debian's libzstd is built with threads")
        var random = SeededRandom(seed: 7)
        let data = [UInt8](random.compressibleBytes(1 << 20))
        var frame = [UInt8](repeating: 0, count: data.count)
        let length = try #require(data.withUnsafeBytes { source in
            frame.withUnsafeMutableBytes { Zstd.compress(source, into: $0, level: 3) }
        })
        frame.removeSubrange(length...)
        #expect(Array(frame.prefix(4)) == [0x28, 0xB5, 0x2F, 0xFD])
        frame.withUnsafeBytes { raw in
            #expect(ZSTD_findFrameCompressedSize(raw.baseAddress, raw.count) == raw.count, "a single frame")
            #expect(ZSTD_getFrameContentSize(raw.baseAddress, raw.count) == UInt64(data.count))
        }
        var restored = [UInt8](repeating: 0, count: data.count)
        let written = restored.withUnsafeMutableBytes { output in
            frame.withUnsafeBytes { ZSTD_decompress(output.baseAddress, output.count, $0.baseAddress, $0.count) }
        }
        #expect(ZSTD_isError(written) == 0 && written == data.count)
        #expect(restored == data)
    }

    /// A destination too small for the frame: nil, and the context serves the next compression.
    @Test func aFrameThatDoesNotFitIsNilAndTheContextIsReused() throws {
        var random = SeededRandom(seed: 8)
        let noise = [UInt8](random.bytes(1 << 20)), text = [UInt8](random.compressibleBytes(1 << 20))
        var output = [UInt8](repeating: 0, count: (1 << 20) - 1)
        for _ in 0 ..< 3 {
            let none = noise.withUnsafeBytes { source in output.withUnsafeMutableBytes { Zstd.compress(source, into: $0, level: 3) } }
            #expect(none == nil)
            let length = try #require(text.withUnsafeBytes { source in
                output.withUnsafeMutableBytes { Zstd.compress(source, into: $0, level: 3) }
            })
            var restored = [UInt8](repeating: 0, count: text.count)
            try output.withUnsafeBytes { frame in
                try restored.withUnsafeMutableBytes { try Zstd.decompress(frame: UnsafeRawBufferPointer(rebasing: frame[..<length]), into: $0) }
            }
            #expect(restored == text)
        }
    }

    /// Puts from many threads at once share the two workers: every blob stored and read back intact.
    @Test func concurrentLargePutsShareTheWorkers() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let values = (0 ..< 8).map { n -> Data in
            var random = SeededRandom(seed: 100 + UInt64(n))
            return n % 2 == 0 ? random.compressibleBytes(1 << 20) : random.bytes(900 << 10)
        }
        let digests = try await withThrowingTaskGroup(of: (Int, Digest).self) { group in
            for (n, value) in values.enumerated() { group.addTask { (n, try await store.put(value)) } }
            var digests = [Digest?](repeating: nil, count: values.count)
            for try await (n, digest) in group { digests[n] = digest }
            return digests.compactMap { $0 }
        }
        for (value, digest) in zip(values, digests) {
            #expect(digest == Digest.sha256(value))
            #expect(try await store.get(digest) == value)
        }
        try await store.close()
    }
}
