// Snapshot reads over 10,000 records, alone and while a writer commits.
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Synchronization

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
private let recordCount = 10_000

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var digests: [Digest] = []
    var counter = 0
    let stopWriter = Atomic<Bool>(false)
    var writer: Thread?
    var store: Store { fixture!.store }
}

private func key(_ i: Int) -> String { "doc/" + String(i) }

/// 10,000 records of 200 bytes; every tenth also references a 4 KiB blob.
private func makeFixture(_ name: String) throws -> (StoreFixture, [Digest]) {
    let fixture = try StoreFixture(name)
    var generator = ContentGenerator(seed: 5)
    let digests = try (0 ..< recordCount / 10).map { _ in try fixture.store.put(Data(generator.textBlock(size: 4096))) }
    for start in stride(from: 0, to: recordCount, by: 1000) {
        try fixture.store.write { transaction in
            for i in start ..< start + 1000 {
                let references = i % 10 == 0 ? [digests[i / 10]] : []
                try transaction.setRecord(Record(value: Data(repeating: UInt8(i & 0xFF), count: 200), references: references), forKey: key(i))
            }
        }
    }
    return (fixture, digests)
}

let benchmarks: @Sendable () -> Void = {
    let quiet = State()
    let setUp: @Sendable () throws -> Void = { (quiet.fixture, quiet.digests) = try makeFixture("snapshots") }
    let tearDown: @Sendable () -> Void = { quiet.fixture?.remove() }

    Benchmark("snapshot: take + 1 record", configuration: .init(metrics: metrics, maxDuration: .seconds(2), setup: setUp, teardown: tearDown)) { benchmark in
        quiet.counter += 1
        let k = key(quiet.counter % recordCount)
        do { blackHole(try quiet.store.read { try $0.record(forKey: k) }) } catch { benchmark.error("\(error)") }
    }

    Benchmark("snapshot: take + 100 records", configuration: .init(metrics: metrics, maxDuration: .seconds(2), setup: setUp, teardown: tearDown)) { benchmark in
        quiet.counter += 1
        let base = (quiet.counter * 100) % recordCount
        do {
            try quiet.store.read { snapshot in
                for i in base ..< base + 100 { blackHole(try snapshot.record(forKey: key(i))) }
            }
        } catch { benchmark.error("\(error)") }
    }

    Benchmark("snapshot: keys(withPrefix:) of 100 keys", configuration: .init(metrics: metrics, maxDuration: .seconds(2), setup: setUp, teardown: tearDown)) { benchmark in
        quiet.counter += 1
        let prefix = key(quiet.counter % 100)  // "doc/N" matches N, N0..N9, N00..N99 : 111 keys
        do { blackHole(try quiet.store.read { try $0.keys(withPrefix: prefix) }) } catch { benchmark.error("\(error)") }
    }

    Benchmark("snapshot: record + its 4 KiB blob, verified", configuration: .init(metrics: metrics, maxDuration: .seconds(2), setup: setUp, teardown: tearDown)) { benchmark in
        quiet.counter += 1
        let k = key((quiet.counter * 10) % recordCount)
        do {
            try quiet.store.read { snapshot in
                guard let record = try snapshot.record(forKey: k) else { return }
                blackHole(try snapshot.get(record.references[0]))
            }
        } catch { benchmark.error("\(error)") }
    }

    // Readers are not blocked by a writer committing (durably) all the while.
    let busy = State()
    Benchmark(
        "snapshot: take + 100 records, 1 writer committing",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(2),
            setup: {
                (busy.fixture, busy.digests) = try makeFixture("snapshots-busy")
                let store = busy.store, state = busy
                let thread = Thread {
                    var i = 0
                    while !state.stopWriter.load(ordering: .relaxed) {
                        var value = Data(repeating: 1, count: 200)
                        value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(i), as: UInt64.self) }  // a real change each time
                        try? store.write { try $0.setRecord(Record(value: value), forKey: key(i % recordCount)) }
                        i += 1
                    }
                }
                busy.writer = thread
                thread.start()
            },
            teardown: {
                busy.stopWriter.store(true, ordering: .relaxed)
                while busy.writer?.isFinished == false { usleep(1000) }
                busy.fixture?.remove()
            })
    ) { benchmark in
        busy.counter += 1
        let base = (busy.counter * 100) % recordCount
        do {
            try busy.store.read { snapshot in
                for i in base ..< base + 100 { blackHole(try snapshot.record(forKey: key(i))) }
            }
        } catch { benchmark.error("\(error)") }
    }
}
