// Garbage collection by garbage fraction and store size.
//
// Issue 3's measurement, at full scale: a store of 1,000,000 small (128-byte) blobs with 1%
// garbage (10,000 blobs), and the same 10,000 garbage blobs in a 10× smaller store (100,000 blobs):
// the times should be within 1.5× of each other, since collection visits only the garbage.
// Default 64 MiB packs (CONTENTSTORE_BENCH_PACK_SIZE overrides; see StoreFixture.smallBlobConfiguration).
// Garbage is spread over the packs (records reference shuffled blobs). Each iteration drops the
// records of the garbage (not measured), collects (measured), then adds as many fresh referenced
// blobs (not measured) so the next iteration finds a store of about the same size.
import Benchmark
import BenchSupport
import ContentStore
import Foundation

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
/// How far the process's peak RSS rose during the collection itself (VmHWM reset just before).
private let collectionPeak = BenchmarkMetric.custom("gc peak RSS growth (KiB)", polarity: .prefersSmaller, useScalingFactor: false)
private let blobsRemoved = BenchmarkMetric.custom("blobs removed", polarity: .prefersLarger, useScalingFactor: false)

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var iteration: UInt64 = 0
    var random = DeterministicRandom(seed: 3)
}

private let perRecord = 100

let benchmarks: @Sendable () -> Void = {
    // `reopened`: the store is closed and opened again after it is filled, so its in-memory
    // structures are rebuilt at their current size (a store filled in this process keeps the
    // capacity its peak needed: every blob is unreferenced between its put and its record's commit).
    let cases: [(blobs: Int, garbage: Int, reopened: Bool, label: String)] = [
        (1_000_000, 10_000, false, "1,000,000 blobs, 1% garbage (issue 3)"),
        (1_000_000, 10_000, true, "1,000,000 blobs, 1% garbage, reopened after filling"),
        (100_000, 10_000, false, "100,000 blobs, the same 10,000 garbage (10%)"),
        (100_000, 1_000, false, "100,000 blobs, 1% garbage"),
        (100_000, 50_000, false, "100,000 blobs, 50% garbage"),
    ]
    for (blobs, garbage, reopened, label) in cases {
        let state = State()
        Benchmark(
            "gc: \(label)",
            configuration: .init(
                metrics: metrics + [collectionPeak, blobsRemoved], warmupIterations: 1, maxDuration: .seconds(15), maxIterations: 8,
                setup: {
                    let fixture = try StoreFixture("gc-\(blobs)-\(garbage)\(reopened ? "-reopened" : "")", configuration: StoreFixture.smallBlobConfiguration())
                    try fixture.populate(blobs: blobs, size: 128, perRecord: perRecord, log: true)
                    if reopened { try fixture.reopen() }
                    state.fixture = fixture
                },
                teardown: { state.fixture?.remove() })
        ) { benchmark in
            guard let fixture = state.fixture else { return }
            do {
                // Not measured: the records of `garbage` blobs go away.
                let live = Array(0 ..< fixture.groups.count).filter { (try? fixture.store.record(forKey: StoreFixture.groupKey($0))) != nil }
                var chosen = live
                for i in chosen.indices.reversed() { chosen.swapAt(i, state.random.below(i + 1)) }
                try fixture.dropGroups(Array(chosen.prefix(garbage / perRecord)))
                ResidentMemory.resetPeak()
                let before = ResidentMemory.current

                benchmark.startMeasurement()
                var options = GarbageCollectionOptions()
                options.gracePeriod = .zero
                let report = try fixture.store.collectGarbage(options)
                benchmark.stopMeasurement()

                benchmark.measurement(collectionPeak, max(0, ResidentMemory.peak - before) / 1024)
                benchmark.measurement(blobsRemoved, report.blobsRemoved)
                // Not measured: as many new referenced blobs, so the store keeps its size.
                state.iteration += 1
                try fixture.populate(blobs: garbage, size: 128, perRecord: perRecord, seed: 1_000_000 &+ state.iteration)
            } catch { benchmark.error("\(error)") }
        }
    }
}
