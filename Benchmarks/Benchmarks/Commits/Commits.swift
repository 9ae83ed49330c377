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

/// `value` with `version` in its first 8 bytes.
private func versioned(_ value: Data, _ version: Int) -> Data {
    var copy = value
    copy.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(version), as: UInt64.self) }
    return copy
}

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
            // A new value every time: a set that changes nothing commits nothing.
            let record = Record(value: versioned(value, single.counter))
            do { try single.store.write { try $0.setRecord(record, forKey: key) } } catch { benchmark.error("\(error)") }
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
            group.counter += 1
            let round = group.counter
            let start = monotonicNanoseconds()
            do {
                try runThreads(writers) { writer in
                    for i in 0 ..< perWriter {
                        let record = Record(value: versioned(value, round))
                        try store.write { try $0.setRecord(record, forKey: "writer\(writer)/key\(i)") }
                    }
                }
            } catch { benchmark.error("\(error)") }
            let seconds = Double(monotonicNanoseconds() - start) / 1e9
            benchmark.measurement(commitsPerSecond, Int(Double(writers * perWriter) / seconds))
        }
    }
}
