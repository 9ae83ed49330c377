// Open (and recover) time by store size: a checkpoint plus a short WAL tail, and a WAL-only replay.
// Issue 2's target: opening a store of 1,000,000 blobs in ≤ 1 s. 128-byte blobs, default packs
// (CONTENTSTORE_BENCH_PACK_SIZE overrides; see StoreFixture.smallBlobConfiguration).
import Benchmark
import BenchSupport
import ContentStore
import Foundation

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
}

let benchmarks: @Sendable () -> Void = {
    for blobs in [10_000, 100_000, 1_000_000] {
        let state = State()
        Benchmark(
            "open, \(blobs.formatted()) blobs, checkpointed",
            configuration: .init(
                metrics: metrics, maxDuration: .seconds(10), maxIterations: 20,
                setup: {
                    let fixture = try StoreFixture("recovery-\(blobs)", configuration: StoreFixture.smallBlobConfiguration())
                    try fixture.populate(blobs: blobs, size: 128, log: true)
                    try fixture.store.checkpoint()
                    // A short tail after the checkpoint, as a store closed in use would have.
                    try fixture.store.write { try $0.setRecord(Record(value: Data("tail".utf8)), forKey: "tail") }
                    try fixture.close()
                    state.fixture = fixture
                },
                teardown: { state.fixture?.remove() })
        ) { benchmark in
            guard let fixture = state.fixture else { return }
            do {
                let store = try Store(at: URL(fileURLWithPath: fixture.directory), configuration: fixture.configuration)
                benchmark.stopMeasurement()
                try store.close()
            } catch { benchmark.error("\(error)") }
        }
    }

    let replay = State()
    let blobs = 100_000
    Benchmark(
        "open, \(blobs.formatted()) blobs, WAL replay only (no checkpoint)",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(10), maxIterations: 20,
            setup: {
                let configuration = StoreFixture.smallBlobConfiguration { $0.checkpointThreshold = .max; $0.walSegmentSize = 1 << 30 }
                let fixture = try StoreFixture("recovery-replay", configuration: configuration)
                try fixture.populate(blobs: blobs, size: 128, log: true)
                try fixture.close()
                replay.fixture = fixture
            },
            teardown: { replay.fixture?.remove() })
    ) { benchmark in
        guard let fixture = replay.fixture else { return }
        do {
            let store = try Store(at: URL(fileURLWithPath: fixture.directory), configuration: fixture.configuration)
            benchmark.stopMeasurement()
            try store.close()
        } catch { benchmark.error("\(error)") }
    }
}
