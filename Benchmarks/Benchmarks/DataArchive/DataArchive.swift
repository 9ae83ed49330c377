// DataArchive operations over ContentStore (issue 5): set, get and archiveCurrent of 1 KiB and
// 1 MiB values through the async API, and the callback API's set + get round trip.
import Benchmark
import BenchSupport
import ContentStore
import DataArchive
import Foundation

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]

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
