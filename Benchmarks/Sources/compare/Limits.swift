import BenchSupport
import ContentStore
import Foundation

/// What this machine allows, measured in every round alongside the contenders. The machine is
/// shared and noisy, so there are two kinds of figure: per-core speeds in CPU time (what a core does
/// when it runs: independent of load), and wall-clock bounds measured with \(cores) threads under the
/// same load the contenders see in that round (what the limit formula means on this machine now).
struct MachineLimits: Codable {
    /// `Digest.sha256` (OpenSSL EVP) over the corpus files, MB per CPU-second of one thread.
    var sha256MBpsPerCore: Double
    /// zstd level 3 over each unique corpus file, MB of input per CPU-second of one thread.
    var zstdMBpsPerCore: Double
    /// Bytes zstd -3 makes of the unique files (raw where that is smaller): the ideal stored size.
    var zstdStoredBytes: Int
    /// CPU seconds of SHA-256 over every byte plus zstd -3 over the unique bytes.
    var ingestCPUSeconds: Double
    /// CPU seconds of reading every corpus file out of the page cache (`open`, `pread` into one
    /// reused buffer, `close`) on one thread: I/O any ingest of files must do, which
    /// ``ingestCPUSeconds`` leaves out.
    var readCPUSeconds: Double
    /// CPU seconds of writing the stored bytes (each unique file's zstd frame appended with one
    /// `pwrite`, then one `fdatasync`) on one thread: the other half of that I/O.
    var storeWriteCPUSeconds: Double
    /// Wall seconds for that same work spread over the cores (threads pulling files from a queue,
    /// from memory, no I/O): the compute bound of an ingest, under this round's load.
    var ingestComputeSeconds: Double
    /// Wall seconds for SHA-256 of every byte spread over the cores: the bound of a re-ingest.
    var reingestComputeSeconds: Double
    /// Sequential 1 MiB writes to a new file, then `fdatasync`, MB/s.
    var writeMBps: Double
    /// A 128-byte append plus `fdatasync` (what one small commit must pay), median and p99, ms.
    var appendSyncMedianMs: Double
    var appendSyncP99Ms: Double
    /// A 4 KiB overwrite inside an allocated file plus `fdatasync` (no metadata to journal), median, ms.
    var overwriteSyncMedianMs: Double
    /// zstd decompression plus SHA-256 of one stored 4 KiB block from memory (the work of one verified
    /// point read with no I/O and no lookup), operations per second on one thread.
    var pointReadOpsPerSecond: Double
    var cores: Int

    /// The compute of ``ingestCPUSeconds`` plus the reads and writes an ingest must do: what an
    /// ingest with no other work at all (no index, log, checksums, chunking or locking) would use.
    var ingestWithIOCPUSeconds: Double { ingestCPUSeconds + readCPUSeconds + storeWriteCPUSeconds }

    /// The cheapest durable write measured: the floor under any commit.
    var syncFloorMs: Double { min(appendSyncMedianMs, overwriteSyncMedianMs) }

    /// Bulk ingest: SHA-256 over every byte plus zstd over the unique bytes spread over the cores,
    /// against writing the stored bytes at the measured bandwidth; the slower of the two.
    func ingestMBps(totalBytes: Int) -> Double {
        Double(totalBytes) / 1e6 / max(ingestComputeSeconds, Double(zstdStoredBytes) / (writeMBps * 1e6))
    }

    /// Re-ingest of unchanged data: SHA-256 over every byte, spread over the cores.
    func reingestMBps(totalBytes: Int) -> Double { Double(totalBytes) / 1e6 / reingestComputeSeconds }

    /// Durable commits: every writer waits for one sync; at best, one sync covers all of them.
    func commitsPerSecond(writers: Int) -> Double { Double(writers) / (syncFloorMs / 1000) }
}

/// Runs the limit probes on data loaded once.
struct LimitProbe {
    let corpus: Corpus
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
        self.corpus = corpus
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
        // Per-core speeds, in thread CPU time.
        let shaStart = threadCPUSeconds()
        for file in files { _ = Digest.sha256(file) }
        let shaCPU = threadCPUSeconds() - shaStart
        var storedSizes: [Int] = []
        let zstdStart = threadCPUSeconds()
        for index in unique {
            storedSizes.append(files[index].withUnsafeBytes { ZstdCodec.compress($0)?.count ?? $0.count })
        }
        let zstdCPU = threadCPUSeconds() - zstdStart
        let readCPU = try readCPUSeconds()
        let storeWriteCPU = try writeCPUSeconds(storedSizes)

        // The same work spread over the cores, in wall time under this round's load.
        let (ingestBest, reingestBest) = try computeSeconds(repetitions: repetitions)

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

        let readRate = try pointReadOpsPerSecond(repetitions: repetitions)

        return MachineLimits(
            sha256MBpsPerCore: Double(totalBytes) / 1e6 / shaCPU,
            zstdMBpsPerCore: Double(uniqueBytes) / 1e6 / zstdCPU,
            zstdStoredBytes: storedSizes.reduce(0, +),
            ingestCPUSeconds: shaCPU + zstdCPU,
            readCPUSeconds: readCPU,
            storeWriteCPUSeconds: storeWriteCPU,
            ingestComputeSeconds: ingestBest,
            reingestComputeSeconds: reingestBest,
            writeMBps: Double(writeSize) / 1e6 / writeBest,
            appendSyncMedianMs: append.median,
            appendSyncP99Ms: append.p99,
            overwriteSyncMedianMs: overwrite.median,
            pointReadOpsPerSecond: readRate,
            cores: ProcessInfo.processInfo.activeProcessorCount)
    }

    /// Thread CPU seconds to read every corpus file from the page cache, as an ingest reads it: the
    /// second of two passes, since the first may find pages the machine evicted and read the disk.
    private func readCPUSeconds() throws -> Double {
        _ = try corpus.readEveryFile()
        return try corpus.readEveryFile()
    }

    /// Thread CPU seconds to append `sizes` bytes, one `pwrite` each, to a new file and sync it.
    private func writeCPUSeconds(_ sizes: [Int]) throws -> Double {
        let path = scratch + "/stored-probe"
        var block = [UInt8](repeating: 0, count: sizes.max() ?? 0)
        var random = DeterministicRandom(seed: 13)
        block.withUnsafeMutableBytes { random.fill($0) }
        let fd = try POSIX.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        defer { Glibc.close(fd); try? POSIX.unlink(path) }
        let start = threadCPUSeconds()
        var offset = 0
        for size in sizes {
            try block.withUnsafeBytes { try POSIX.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[..<size]), at: offset, path: path) }
            offset += size
        }
        try POSIX.fdatasync(fd, path: path)
        return threadCPUSeconds() - start
    }

    /// Wall seconds of the ideal ingest (SHA-256 of every file, zstd of the unique ones, threads
    /// pulling files from a queue, from memory) and of the ideal re-ingest (SHA-256 only), best of
    /// `repetitions`, on one thread per core.
    func computeSeconds(repetitions: Int = 2) throws -> (ingest: Double, reingest: Double) {
        let isUnique = Set(unique)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var ingestBest = Double.infinity, reingestBest = Double.infinity
        for _ in 0 ..< repetitions {
            ingestBest = min(ingestBest, try measureSeconds {
                let queue = WorkQueue(count: files.count)
                try runThreads(cores) { [files] _ in
                    while let index = queue.next() {
                        files[index].withUnsafeBytes { bytes in
                            _ = Digest.sha256(bytes)
                            if isUnique.contains(index) { _ = ZstdCodec.compress(bytes) }
                        }
                    }
                }
            })
            reingestBest = min(reingestBest, try measureSeconds {
                let queue = WorkQueue(count: files.count)
                try runThreads(cores) { [files] _ in
                    while let index = queue.next() { _ = Digest.sha256(files[index]) }
                }
            })
        }
        return (ingestBest, reingestBest)
    }

    /// Verified 4 KiB decodes per second on one thread (zstd decode + SHA-256 from memory), best of `repetitions`.
    func pointReadOpsPerSecond(repetitions: Int = 2, operations: Int = 50_000) throws -> Double {
        var readBest = Double.infinity
        let readOps = min(operations, blocks.count * 4)
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
        return Double(readOps) / readBest
    }

    /// The cheapest durable write right now, in ms (median of `count` appends and of `count`
    /// overwrites, the smaller): the commit bound is probed just before the commit runs, since the
    /// disk's latency here swings with what other tenants write.
    func syncFloorMs(count: Int = 100) throws -> Double {
        min(try syncLatencies(count: count, bytes: 128, overwrite: false).median,
            try syncLatencies(count: count, bytes: 4096, overwrite: true).median)
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
