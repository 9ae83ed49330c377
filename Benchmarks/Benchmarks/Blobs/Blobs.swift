// put / get by size. ContentStore's default configuration: zstd 3, verified reads.
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Synchronization

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
private let megabytesPerSecond = BenchmarkMetric.custom("MB/s", polarity: .prefersLarger, useScalingFactor: false)

/// Set up by a benchmark's setup hook, used by its iterations, removed by its teardown.
private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var payload = Data()
    var digests: [Digest] = []
    var counter: UInt64 = 0
    var store: Store { fixture!.store }

    /// The payload with a fresh tag in its first 8 bytes: never seen by the store before.
    func nextPayload() -> Data {
        counter &+= 1
        let tag = counter &* 0x9E37_79B9_7F4A_7C15
        payload.withUnsafeMutableBytes { $0.storeBytes(of: tag, as: UInt64.self) }
        return payload
    }
}

private func textPayload(_ size: Int, seed: UInt64) -> Data {
    var generator = ContentGenerator(seed: seed)
    return Data(generator.textBlock(size: size))
}

let benchmarks: @Sendable () -> Void = {
    for (label, size) in [("1 KiB", 1 << 10), ("64 KiB", 64 << 10), ("1 MiB", 1 << 20)] {
        let put = State()
        Benchmark(
            "put \(label), new bytes",
            configuration: .init(
                metrics: metrics + [megabytesPerSecond], maxDuration: .seconds(3), maxIterations: 20_000,
                setup: {
                    put.fixture = try StoreFixture("blobs-put-\(size)")
                    put.payload = textPayload(size, seed: UInt64(size))
                },
                teardown: { put.fixture?.remove() })
        ) { benchmark in
            let data = put.nextPayload()
            let start = monotonicNanoseconds()
            do { blackHole(try put.store.put(data)) } catch { benchmark.error("\(error)") }
            benchmark.measurement(megabytesPerSecond, Int(Double(size) / (Double(monotonicNanoseconds() - start) / 1e9) / 1e6))
        }

        let get = State()
        Benchmark(
            "get \(label), verified",
            configuration: .init(
                metrics: metrics, maxDuration: .seconds(3), maxIterations: 50_000,
                setup: {
                    let fixture = try StoreFixture("blobs-get-\(size)")
                    get.fixture = fixture
                    get.payload = textPayload(size, seed: UInt64(size) + 1)
                    get.digests = try (0 ..< 64).map { _ in try fixture.store.put(get.nextPayload()) }
                    try fixture.store.write { try $0.setRecord(Record(references: get.digests), forKey: "all") }
                },
                teardown: { get.fixture?.remove() })
        ) { benchmark in
            get.counter &+= 1
            do { blackHole(try get.store.get(get.digests[Int(get.counter % 64)])) } catch { benchmark.error("\(error)") }
        }
    }

    // Issue 2's target: ≥ 300 MB/s putting 64 KiB compressible blobs from 2 threads.
    let parallel = State()
    let perThread = 128
    Benchmark(
        "put 64 KiB, 2 threads (\(2 * perThread) blobs per iteration)",
        configuration: .init(
            metrics: metrics + [megabytesPerSecond], maxDuration: .seconds(5), maxIterations: 200,
            setup: {
                parallel.fixture = try StoreFixture("blobs-put-parallel")
                parallel.payload = textPayload(64 << 10, seed: 64)
            },
            teardown: { parallel.fixture?.remove() })
    ) { benchmark in
        let store = parallel.store
        let base = parallel.payload
        parallel.counter &+= 1
        let round = parallel.counter
        let start = monotonicNanoseconds()
        do {
            try runThreads(2) { thread in
                var data = base
                for i in 0 ..< perThread {
                    let tag = (round << 20 | UInt64(thread) << 16 | UInt64(i)) &* 0x9E37_79B9_7F4A_7C15
                    data.withUnsafeMutableBytes { $0.storeBytes(of: tag, as: UInt64.self) }
                    _ = try store.put(data)
                }
            }
        } catch { benchmark.error("\(error)") }
        let seconds = Double(monotonicNanoseconds() - start) / 1e9
        benchmark.measurement(megabytesPerSecond, Int(Double(2 * perThread * (64 << 10)) / seconds / 1e6))
    }

    // Small puts against a fresh pack and against one already holding 20,000 entries (default
    // 64 MiB packs). Equal costs mean a put is O(1) in the pack's size (a regression guard: before
    // engine commit f0af0c2 every append copied the pack's index).
    for (label, existing) in [("fresh pack", 0), ("pack already holding 20,000 entries", 20_000)] {
        let small = State()
        Benchmark(
            "put 128 B, \(label)",
            configuration: .init(
                metrics: metrics, maxDuration: .seconds(2), maxIterations: 2000,
                setup: {
                    let fixture = try StoreFixture("blobs-small-\(existing)")
                    if existing > 0 { try fixture.populate(blobs: existing, size: 128, threads: 1) }
                    small.fixture = fixture
                    small.payload = textPayload(128, seed: 128)
                },
                teardown: { small.fixture?.remove() })
        ) { benchmark in
            let data = small.nextPayload()
            do { blackHole(try small.store.put(data)) } catch { benchmark.error("\(error)") }
        }
    }
}
