// DataArchive operations over ContentStore (issue 5): set, get and archiveCurrent of 1 KiB and
// 1 MiB values through the async API; the callback API's set waiting for its completion, its
// set + get round trip, and fire-and-forget sets followed by a barrier; and the bytes 100
// versions with 10 distinct contents occupy. The side-by-side comparison with the original's
// file-per-key scheme is in `compare` (workload `archive`).
import Benchmark
import BenchSupport
import ContentStore
import DataArchive
import Foundation
import Synchronization

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]
private let storedVersions = BenchmarkMetric.custom("stored bytes, in versions", polarity: .prefersSmaller, useScalingFactor: false)

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var archive: DataArchive?
    var counter: UInt64 = 0
    var value = Data()

    func setUp(_ name: String, size: Int) throws {
        let fixture = try StoreFixture(name)
        self.fixture = fixture
        archive = DataArchive(store: fixture.store)
        var generator = ContentGenerator(seed: UInt64(size))
        value = Data(generator.textBlock(size: size))
    }

    /// The value with a fresh tag: a new version each time.
    func nextValue() -> Data {
        counter &+= 1
        let tag = counter &* 0x9E37_79B9_7F4A_7C15
        value.withUnsafeMutableBytes { $0.storeBytes(of: tag, as: UInt64.self) }
        return value
    }
}

let benchmarks: @Sendable () -> Void = {
    for (label, size) in [("1 KiB", 1 << 10), ("1 MiB", 1 << 20)] {
        let set = State()
        Benchmark(
            "set \(label)",
            configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 5000,
                                 setup: { try set.setUp("archive-set-\(size)", size: size) }, teardown: { set.fixture?.remove() })
        ) { benchmark in
            set.counter &+= 1
            let key = "doc\(set.counter % 256)"
            do { try await set.archive!.set(set.nextValue(), forKey: key) } catch { benchmark.error("\(error)") }
        }

        let get = State()
        Benchmark(
            "get \(label)",
            configuration: .init(
                metrics: metrics, maxDuration: .seconds(3), maxIterations: 20_000,
                setup: {
                    try get.setUp("archive-get-\(size)", size: size)
                    for i in 0 ..< 64 { try await get.archive!.set(get.nextValue(), forKey: "doc\(i)") }
                },
                teardown: { get.fixture?.remove() })
        ) { benchmark in
            get.counter &+= 1
            do { blackHole(try await get.archive!.data(forKey: "doc\(get.counter % 64)")) } catch { benchmark.error("\(error)") }
        }

        let archive = State()
        Benchmark(
            "archiveCurrent \(label)",
            configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 5000,
                                 setup: { try archive.setUp("archive-archive-\(size)", size: size) }, teardown: { archive.fixture?.remove() })
        ) { benchmark in
            archive.counter &+= 1
            let key = "doc\(archive.counter % 64)"
            do { try await archive.archive!.archiveCurrent(andSet: archive.nextValue(), forKey: key) } catch { benchmark.error("\(error)") }
        }
    }

    // The original callback API, each set waited for: one durable commit per iteration.
    let waited = State()
    Benchmark(
        "callback API: set 1 KiB, waiting for the completion",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 5000,
                             setup: { try waited.setUp("archive-callback-set", size: 1 << 10) }, teardown: { waited.fixture?.remove() })
    ) { benchmark in
        waited.counter &+= 1
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<DataArchiveResult?>(nil)
        waited.archive!.set(key: "doc\(waited.counter % 64)", data: waited.nextValue()) { result in
            if !result.isSuccess { failure.withLock { $0 = result } }
            done.signal()
        }
        done.wait()
        if let result = failure.withLock({ $0 }) { benchmark.error("\(result)") }
    }

    // Fire-and-forget: 64 sets on 64 keys without handlers, then a get of each key (per-key order
    // makes it a barrier: every set is durable when the gets have answered).
    let fireAndForget = State()
    Benchmark(
        "callback API: 64 fire-and-forget sets of 1 KiB on 64 keys + barrier",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 1000,
                             setup: { try fireAndForget.setUp("archive-fire-and-forget", size: 1 << 10) },
                             teardown: { fireAndForget.fixture?.remove() })
    ) { _ in
        let archive = fireAndForget.archive!
        for key in 0 ..< 64 { archive.set(key: "doc\(key)", data: fireAndForget.nextValue()) }
        let group = DispatchGroup()
        for key in 0 ..< 64 {
            group.enter()
            archive.get(key: "doc\(key)") { _, _ in group.leave() }
        }
        group.wait()
    }

    // Issue 5: 100 versions of 1 MiB where only 10 distinct contents occur take ~10 versions' bytes.
    Benchmark(
        "storage: 100 archiveCurrent of 1 MiB, 10 distinct contents",
        configuration: .init(metrics: [.wallClock, storedVersions], maxDuration: .seconds(10), maxIterations: 3)
    ) { benchmark in
        do {
            let fixture = try StoreFixture("archive-storage")
            defer { fixture.remove() }
            var random = DeterministicRandom(seed: 55)
            let contents: [Data] = (0 ..< 10).map { _ in
                var data = Data(count: 1 << 20)
                data.withUnsafeMutableBytes { random.fill($0) }
                return data
            }
            let archive = DataArchive(store: fixture.store)
            for index in 0 ..< 100 { try await archive.archiveCurrent(andSet: contents[index % 10], forKey: "document") }
            try fixture.close()
            benchmark.measurement(storedVersions, Int(POSIX.diskUsage(fixture.directory) / (1 << 20)))
        } catch { benchmark.error("\(error)") }
    }

    // The original callback API: a fire-and-forget set followed by a get of the same key.
    let callbacks = State()
    Benchmark(
        "callback API: set + get 1 KiB",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 5000,
                             setup: { try callbacks.setUp("archive-callbacks", size: 1 << 10) }, teardown: { callbacks.fixture?.remove() })
    ) { benchmark in
        let archive = callbacks.archive!
        let key = "doc\(callbacks.counter % 64)"
        let done = DispatchSemaphore(value: 0)
        archive.set(key: key, data: callbacks.nextValue())
        archive.get(key: key) { data, _ in
            blackHole(data)
            done.signal()
        }
        done.wait()
    }
}
