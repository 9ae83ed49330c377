// Large data (issue 8): chunking alone, streaming put of a 1 GiB file, and stored bytes for 100
// versions of a 16 MiB file with 4 KiB edits. Targets: chunking ≥ 1 GB/s per core; streaming put
// ≥ 300 MB/s with < 64 MiB peak memory; versions ≤ 1.5× one version's zstd-3 size.
import Benchmark
import BenchSupport
import ContentStore
import Foundation

private let megabytesPerSecond = BenchmarkMetric.custom("MB/s", polarity: .prefersLarger, useScalingFactor: false)
private let peakMebibytes = BenchmarkMetric.custom("peak RSS growth (MiB)", polarity: .prefersSmaller, useScalingFactor: false)
private let storedRatio = BenchmarkMetric.custom("stored ÷ one version zstd-3 (×100)", polarity: .prefersSmaller, useScalingFactor: false)
/// The same once a checkpoint has run (as the store does on its own once the WAL passes
/// `checkpointThreshold`): the WAL no longer holds the pack bytes its commits carried.
private let storedRatioAtRest = BenchmarkMetric.custom("… after a checkpoint (×100)", polarity: .prefersSmaller, useScalingFactor: false)

/// Set up by a benchmark's setup hook, used by its iterations.
private final class State: @unchecked Sendable {
    var bytes: [UInt8] = []
    var directory = ""
    var file = ""
}

private func generate(_ kind: Corpus.Kind, size: Int, seed: UInt64) -> [UInt8] {
    var generator = ContentGenerator(seed: seed)
    var bytes: [UInt8] = []
    generator.generate(kind, size: size, into: &bytes)
    return bytes
}

let benchmarks: @Sendable () -> Void = {
    for kind in [Corpus.Kind.text, .binary] {
        let state = State()
        Benchmark(
            "chunking 64 MiB, \(kind)",
            configuration: .init(
                metrics: [.wallClock, megabytesPerSecond], maxDuration: .seconds(5), maxIterations: 50,
                setup: { state.bytes = generate(kind, size: 64 << 20, seed: 8) })
        ) { benchmark in
            let start = monotonicNanoseconds()
            let lengths = state.bytes.withUnsafeBytes { try? ChunkingParameters.default.chunkLengths(of: $0) }
            blackHole(lengths)
            benchmark.measurement(megabytesPerSecond, Int(Double(64 << 20) / (Double(monotonicNanoseconds() - start) / 1e9) / 1e6))
        }
    }

    // A fresh store per iteration, so every byte is new; the file is written once, in 4 MiB pieces.
    let streaming = State()
    Benchmark(
        "put(contentsOf:) 1 GiB text file, new store",
        configuration: .init(
            metrics: [.wallClock, megabytesPerSecond, peakMebibytes], maxDuration: .seconds(60), maxIterations: 3,
            setup: {
                streaming.directory = try POSIX.scratchDirectory("largedata-stream")
                streaming.file = streaming.directory + "/input"
                let fd = try POSIX.open(streaming.file, O_WRONLY | O_CREAT | O_TRUNC)
                defer { close(fd) }
                var generator = ContentGenerator(seed: 1)
                for _ in 0 ..< 256 {
                    let piece = generator.textBlock(size: 4 << 20)
                    try piece.withUnsafeBytes { try POSIX.writeAll(fd, $0) }
                }
            },
            teardown: { POSIX.removeTree(streaming.directory) })
    ) { benchmark in
        do {
            let storeDirectory = streaming.directory + "/store"
            let store = try Store(at: URL(fileURLWithPath: storeDirectory), configuration: StoreFixture.configuration())
            ResidentMemory.resetPeak()
            let baseline = ResidentMemory.current
            let start = monotonicNanoseconds()
            blackHole(try store.put(contentsOf: URL(fileURLWithPath: streaming.file)))
            let seconds = Double(monotonicNanoseconds() - start) / 1e9
            benchmark.measurement(megabytesPerSecond, Int(Double(1 << 30) / seconds / 1e6))
            benchmark.measurement(peakMebibytes, (ResidentMemory.peak - baseline) >> 20)
            try store.close()
            POSIX.removeTree(storeDirectory)
        } catch {
            benchmark.error("\(error)")
        }
    }

    // Issue 8's version workload: 100 versions, each the last with 4 KiB overwritten at a random
    // offset, each referenced by a record (as DataArchive keeps versions).
    for kind in [Corpus.Kind.text, .binary] {
        let versions = State()
        Benchmark(
            "100 versions of 16 MiB \(kind), 4 KiB edits",
            configuration: .init(
                metrics: [.wallClock, storedRatio, storedRatioAtRest], maxDuration: .seconds(120), maxIterations: 1,
                setup: {
                    versions.bytes = generate(kind, size: 16 << 20, seed: 100)
                    versions.directory = try POSIX.scratchDirectory("largedata-versions")
                },
                teardown: { POSIX.removeTree(versions.directory) })
        ) { benchmark in
            do {
                let store = try Store(at: URL(fileURLWithPath: versions.directory + "/store"), configuration: StoreFixture.configuration())
                var random = DeterministicRandom(seed: 4096)
                var data = Data(versions.bytes)
                for version in 0 ..< 100 {
                    if version > 0 {
                        let offset = Int(random.next() % UInt64(data.count - 4096))
                        var edit = [UInt8](repeating: 0, count: 4096)
                        edit.withUnsafeMutableBytes { random.fill($0) }
                        data.replaceSubrange(offset ..< offset + 4096, with: edit)
                    }
                    let digest = try store.put(data)
                    try store.write { try $0.setRecord(Record(references: [digest]), forKey: "doc/\(version)") }
                }
                let oneVersion = versions.bytes.withUnsafeBytes { ZstdCodec.compress($0)?.count ?? $0.count }
                let stored = POSIX.diskUsage(versions.directory + "/store")
                benchmark.measurement(storedRatio, Int(Double(stored) / Double(oneVersion) * 100))
                try store.checkpoint()
                try store.close()
                let atRest = POSIX.diskUsage(versions.directory + "/store")
                benchmark.measurement(storedRatioAtRest, Int(Double(atRest) / Double(oneVersion) * 100))
            } catch {
                benchmark.error("\(error)")
            }
        }
    }
}
