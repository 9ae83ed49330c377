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

/// 64 fields of the kinds settings have (short strings are stored inline, as most settings' are).
struct Settings64: Codable, Sendable, Equatable {
    var flag0 = false
    var flag1 = false
    var flag2 = false
    var flag3 = false
    var flag4 = false
    var flag5 = false
    var flag6 = false
    var flag7 = false
    var flag8 = false
    var flag9 = false
    var flag10 = false
    var flag11 = false
    var flag12 = false
    var flag13 = false
    var flag14 = false
    var flag15 = false
    var number0 = 0
    var number1 = 1
    var number2 = 2
    var number3 = 3
    var number4 = 4
    var number5 = 5
    var number6 = 6
    var number7 = 7
    var number8 = 8
    var number9 = 9
    var number10 = 10
    var number11 = 11
    var number12 = 12
    var number13 = 13
    var number14 = 14
    var number15 = 15
    var ratio0 = 0.5
    var ratio1 = 1.5
    var ratio2 = 2.5
    var ratio3 = 3.5
    var ratio4 = 4.5
    var ratio5 = 5.5
    var ratio6 = 6.5
    var ratio7 = 7.5
    var ratio8 = 8.5
    var ratio9 = 9.5
    var ratio10 = 10.5
    var ratio11 = 11.5
    var ratio12 = 12.5
    var ratio13 = 13.5
    var ratio14 = 14.5
    var ratio15 = 15.5
    var name0 = "name 0"
    var name1 = "name 1"
    var name2 = "name 2"
    var name3 = "name 3"
    var name4 = "name 4"
    var name5 = "name 5"
    var name6 = "name 6"
    var name7 = "name 7"
    var name8 = "name 8"
    var name9 = "name 9"
    var name10 = "name 10"
    var name11 = "name 11"
    var name12 = "name 12"
    var name13 = "name 13"
    var name14 = "name 14"
    var name15 = "name 15"
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

    // The harness's own cost for the same copy: a 64-field struct read from a class's property.
    final class Holder: @unchecked Sendable { var settings = Settings64() }
    let holder = Holder()
    Benchmark(
        "copy of a 64-field struct from a class (harness floor for the line above)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .kilo, maxDuration: .seconds(2))
    ) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(holder.settings) }
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

    // The floor under an update of a large state: the changed chunk (about 8 KiB) put, and a commit
    // referencing it.
    let floor = Fixture<Settings64>()
    Benchmark(
        "put 8 KiB + durable commit referencing it (floor)",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000,
                             setup: { try floor.setUp("statelens-floor", default: Settings64(), store: false) },
                             teardown: { floor.fixture?.remove() })
    ) { benchmark in
        floor.counter += 1
        var chunk = Data(repeating: 0x62, count: 8 * 1024)
        withUnsafeBytes(of: floor.counter) { chunk.replaceSubrange(0 ..< 8, with: $0) }
        do {
            let store = floor.fixture!.store
            let digest = try store.put(chunk)
            try store.write { try $0.setRecord(Record(value: Data(repeating: 0x61, count: 300), references: [digest]), forKey: "floor") }
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
