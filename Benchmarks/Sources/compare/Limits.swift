import BenchSupport
import ContentStore
import Foundation

/// What this machine allows, measured in every round alongside the contenders (the machine is
/// shared and noisy: a limit measured at another moment would not bound the same run).
struct MachineLimits: Codable {
    /// `Digest.sha256` (OpenSSL EVP) over the corpus files, one core, MB/s.
    var sha256MBps: Double
    /// zstd level 3 over each unique corpus file, one core, MB/s of input.
    var zstdMBps: Double
    /// Bytes zstd -3 makes of the unique files (raw where that is smaller): the ideal stored size.
    var zstdStoredBytes: Int
    /// Sequential 1 MiB writes to a new file, then `fdatasync`, MB/s.
    var writeMBps: Double
    /// A 128-byte append plus `fdatasync` (what one small commit must pay), median and p99, ms.
    var appendSyncMedianMs: Double
    var appendSyncP99Ms: Double
    /// A 4 KiB overwrite inside an allocated file plus `fdatasync` (no metadata to journal), median, ms.
    var overwriteSyncMedianMs: Double
    /// zstd decompression plus SHA-256 of one stored 4 KiB block from memory (the work of one verified
    /// point read with no I/O and no lookup), operations per second on one core.
    var pointReadOpsPerSecond: Double
    var cores: Int

    /// The cheapest durable write measured: the floor under any commit.
    var syncFloorMs: Double { min(appendSyncMedianMs, overwriteSyncMedianMs) }

    /// Bulk ingest: SHA-256 over every byte plus zstd over the unique bytes, spread over the cores,
    /// against writing the stored bytes at the measured bandwidth; the slower of the two.
    func ingestMBps(totalBytes: Int, uniqueBytes: Int) -> Double {
        let cpu = (Double(totalBytes) / (sha256MBps * 1e6) + Double(uniqueBytes) / (zstdMBps * 1e6)) / Double(cores)
        let disk = Double(zstdStoredBytes) / (writeMBps * 1e6)
        return Double(totalBytes) / 1e6 / max(cpu, disk)
    }

    /// Re-ingest of unchanged data: SHA-256 over every byte, spread over the cores.
    var reingestMBps: Double { sha256MBps * Double(cores) }

    /// Durable commits: every writer waits for one sync; at best, one sync covers all of them.
    func commitsPerSecond(writers: Int) -> Double { Double(writers) / (syncFloorMs / 1000) }
}

/// Runs the limit probes on data loaded once.
struct LimitProbe {
    let files: [[UInt8]]
    let unique: [Int]
    let totalBytes: Int
    let uniqueBytes: Int
    let blocks: [(stored: [UInt8], compressed: Bool, digest: Digest, size: Int)]
    let scratch: String

    init(corpus: Corpus, readBlocks: [[UInt8]], scratch: String) throws {
        var files: [[UInt8]] = []
        var unique: [Int] = []
        for index in corpus.files.indices {
            files.append(try POSIX.readFile(corpus.absolutePath(index)) ?? [])
            if corpus.files[index].original == nil { unique.append(index) }
        }
        self.files = files
        self.unique = unique
        totalBytes = corpus.totalBytes
        uniqueBytes = corpus.uniqueBytes
        blocks = readBlocks.map { block in
            let compressed = block.withUnsafeBytes { ZstdCodec.compress($0) }
            return (compressed ?? block, compressed != nil, Digest.sha256(block), block.count)
        }
        self.scratch = scratch
    }

    func run(repetitions: Int = 2) throws -> MachineLimits {
        var shaBest = Double.infinity
        for _ in 0 ..< repetitions {
            shaBest = min(shaBest, measureSeconds { for file in files { _ = Digest.sha256(file) } })
        }

        var zstdBest = Double.infinity
        var stored = 0
        for _ in 0 ..< repetitions {
            var bytes = 0
            zstdBest = min(zstdBest, measureSeconds {
                for index in unique {
                    bytes += files[index].withUnsafeBytes { ZstdCodec.compress($0)?.count ?? $0.count }
                }
            })
            stored = bytes
        }

        let writeSize = min(256 << 20, max(32 << 20, totalBytes / 2))
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var random = DeterministicRandom(seed: 7)
        chunk.withUnsafeMutableBytes { random.fill($0) }
        var writeBest = Double.infinity
        for repetition in 0 ..< repetitions {
            let path = scratch + "/write-\(repetition)"
            let fd = try POSIX.open(path, O_WRONLY | O_CREAT | O_TRUNC)
            writeBest = min(writeBest, try measureSeconds {
                for _ in 0 ..< writeSize >> 20 { try chunk.withUnsafeBytes { try POSIX.writeAll(fd, $0, path: path) } }
                try POSIX.fdatasync(fd, path: path)
            })
            Glibc.close(fd)
            try POSIX.unlink(path)
        }

        let append = try syncLatencies(count: 200, bytes: 128, overwrite: false)
        let overwrite = try syncLatencies(count: 200, bytes: 4096, overwrite: true)

        var readBest = Double.infinity
        let readOps = min(100_000, blocks.count * 4)
        var output = [UInt8](repeating: 0, count: 4096)
        for _ in 0 ..< repetitions {
            var pick = DeterministicRandom(seed: 11)
            readBest = min(readBest, try measureSeconds {
                for _ in 0 ..< readOps {
                    let block = blocks[pick.below(blocks.count)]
                    try output.withUnsafeMutableBytes { destination in
                        let target = UnsafeMutableRawBufferPointer(rebasing: destination[0 ..< block.size])
                        try block.stored.withUnsafeBytes { source in
                            if block.compressed { try ZstdCodec.decompress(source, into: target) } else { target.copyMemory(from: source) }
                        }
                        guard Digest.sha256(UnsafeRawBufferPointer(target)) == block.digest else {
                            throw VerificationFailed(description: "limit probe: digest mismatch")
                        }
                    }
                }
            })
        }

        return MachineLimits(
            sha256MBps: Double(totalBytes) / 1e6 / shaBest,
            zstdMBps: Double(uniqueBytes) / 1e6 / zstdBest,
            zstdStoredBytes: stored,
            writeMBps: Double(writeSize) / 1e6 / writeBest,
            appendSyncMedianMs: append.median,
            appendSyncP99Ms: append.p99,
            overwriteSyncMedianMs: overwrite.median,
            pointReadOpsPerSecond: Double(readOps) / readBest,
            cores: ProcessInfo.processInfo.activeProcessorCount)
    }

    /// Latency of `bytes` written then `fdatasync`ed: appended to a growing file, or overwriting the
    /// start of a file whose blocks are already allocated and synced.
    private func syncLatencies(count: Int, bytes: Int, overwrite: Bool) throws -> Summary {
        let path = scratch + "/sync-probe"
        let fd = try POSIX.open(path, O_WRONLY | O_CREAT | O_TRUNC | (overwrite ? 0 : O_APPEND))
        defer { Glibc.close(fd); try? POSIX.unlink(path) }
        let block = [UInt8](repeating: 0x5A, count: bytes)
        if overwrite {
            try block.withUnsafeBytes { try POSIX.writeAll(fd, $0, path: path) }
            try POSIX.fsync(fd, path: path)
        }
        var latencies: [Double] = []
        for _ in 0 ..< count {
            let start = monotonicNanoseconds()
            if overwrite {
                _ = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            } else {
                try block.withUnsafeBytes { try POSIX.writeAll(fd, $0, path: path) }
            }
            try POSIX.fdatasync(fd, path: path)
            latencies.append(Double(monotonicNanoseconds() - start) / 1e6)
        }
        return Summary(latencies)
    }
}
