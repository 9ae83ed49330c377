// StateLens (issue 20): `value` of a 64-field state (target ≤ 100 ns), and an update of one field
// of a ~1 MB state (target: one durable commit, ≤ 2× a durable 1 KiB commit, because only the
// changed part is written) side by side with a durable 1 KiB record commit and with what POSLens's
// file store does: archive the whole state and write it to a file, here with fsync.
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import StateLens

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal]

/// 64 fields of the kinds settings have.
struct Settings64: Codable, Sendable, Equatable {
    var flags = [Bool](repeating: false, count: 16)
    var numbers = [Int](repeating: 0, count: 16)
    var names = [String](repeating: "name", count: 16)
    var ratios = [Double](repeating: 0.5, count: 16)
    var counter = 0
}

struct Entry: Codable, Sendable, Equatable {
    var id: Int
    var title: String
    var text: String
}

/// About 1 MB of canonical JSON.
struct LargeState: Codable, Sendable, Equatable {
    var counter = 0
    var entries: [Entry] = (0 ..< 1000).map { Entry(id: $0, title: "entry \($0)", text: String(repeating: "text of entry \($0) ", count: 50)) }
}

private final class Fixture<Root: Codable & Sendable & Equatable>: @unchecked Sendable {
    var fixture: StoreFixture?
    var state: LensStore<Root>?
    var counter = 0

    func setUp(_ name: String, default value: Root, store initial: Bool) throws {
        let fixture = try StoreFixture(name)
        self.fixture = fixture
        let state = try LensStore(store: fixture.store, name: "state", default: value)
        if initial { try state.root.set(value) }
        self.state = state
    }
}

let benchmarks: @Sendable () -> Void = {
    let read = Fixture<Settings64>()
    Benchmark(
        "value of a 64-field state",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .kilo, maxDuration: .seconds(3),
                             setup: { try read.setUp("statelens-value", default: Settings64(), store: true) },
                             teardown: { read.fixture?.remove() })
    ) { benchmark in
        let state = read.state!
        for _ in benchmark.scaledIterations { blackHole(state.value) }
    }

    let large = Fixture<LargeState>()
    Benchmark(
        "update one field of a 1 MB state",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000,
                             setup: { try large.setUp("statelens-large", default: LargeState(), store: true) },
                             teardown: { large.fixture?.remove() })
    ) { benchmark in
        large.counter += 1
        let index = large.counter % 1000
        do { try large.state!.root.entries.update { $0[index].title = "updated \(large.counter)" } } catch { benchmark.error("\(error)") }
    }

    let commit = Fixture<Settings64>()
    let kibibyte = Data(repeating: 0x61, count: 1024)
    Benchmark(
        "durable 1 KiB commit (baseline)",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000,
                             setup: { try commit.setUp("statelens-commit", default: Settings64(), store: false) },
                             teardown: { commit.fixture?.remove() })
    ) { benchmark in
        commit.counter += 1
        var value = kibibyte
        value[0] = UInt8(truncatingIfNeeded: commit.counter)
        do {
            try commit.fixture!.store.write { try $0.setRecord(Record(value: value), forKey: "baseline") }
        } catch { benchmark.error("\(error)") }
    }

    let file = Fixture<LargeState>()
    Benchmark(
        "rewrite the whole 1 MB state to a file with fsync (POSLens's way, made durable)",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000,
                             setup: { try file.setUp("statelens-file", default: LargeState(), store: false) },
                             teardown: { file.fixture?.remove() })
    ) { benchmark in
        file.counter += 1
        var state = file.state!.defaultValue
        state.entries[file.counter % 1000].title = "updated \(file.counter)"
        do {
            let bytes = try JSONEncoder().encode(state)
            let path = file.fixture!.directory + "/state.json"
            try bytes.withUnsafeBytes { try POSIX.atomicWrite(path, $0, temporarySuffix: ".tmp") }
        } catch { benchmark.error("\(error)") }
    }
}
