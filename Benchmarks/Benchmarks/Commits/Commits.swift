// Durable (`.full`) single-record commits from 1 and 16 concurrent writers; group commit lets the
// 16 share fsyncs. `.none` for reference.
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Synchronization

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
private let commitsPerSecond = BenchmarkMetric.custom("commits/s", polarity: .prefersLarger, useScalingFactor: false)

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var counter = 0
    var store: Store { fixture!.store }
}

private let value = Data(repeating: 0x42, count: 100)

let benchmarks: @Sendable () -> Void = {
    for (label, durability) in [("durable", Store.Durability.full), ("durability none", .none)] {
        let single = State()
        Benchmark(
            "commit, 1 writer, \(label)",
            configuration: .init(
                metrics: metrics, maxDuration: .seconds(3), maxIterations: 100_000,
                setup: { single.fixture = try StoreFixture("commits-1-\(label)", configuration: StoreFixture.configuration { $0.durability = durability }) },
                teardown: { single.fixture?.remove() })
        ) { benchmark in
            single.counter += 1
            let key = "key\(single.counter % 1024)"
            do { try single.store.write { try $0.setRecord(Record(value: value), forKey: key) } } catch { benchmark.error("\(error)") }
        }

        let writers = 16, perWriter = 64
        let group = State()
        Benchmark(
            "commits, \(writers) writers × \(perWriter), \(label)",
            configuration: .init(
                metrics: metrics + [commitsPerSecond], maxDuration: .seconds(4), maxIterations: 1000,
                setup: { group.fixture = try StoreFixture("commits-16-\(label)", configuration: StoreFixture.configuration { $0.durability = durability }) },
                teardown: { group.fixture?.remove() })
        ) { benchmark in
            let store = group.store
            let start = monotonicNanoseconds()
            do {
                try runThreads(writers) { writer in
                    for i in 0 ..< perWriter {
                        try store.write { try $0.setRecord(Record(value: value), forKey: "writer\(writer)/key\(i)") }
                    }
                }
            } catch { benchmark.error("\(error)") }
            let seconds = Double(monotonicNanoseconds() - start) / 1e9
            benchmark.measurement(commitsPerSecond, Int(Double(writers * perWriter) / seconds))
        }
    }
}
