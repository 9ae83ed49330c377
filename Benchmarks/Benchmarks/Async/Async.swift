// The async API's overhead (issue 15): `await get` of a cached 4 KiB blob against the blocking get
// (target: within 2 µs), 16 tasks awaiting durable commits against 16 threads committing (target:
// ≥ 90% of their rate), and a `stats` request over the control socket (target: ≤ 5 ms).
#if canImport(Glibc)
import Glibc
#endif
import Benchmark
import BenchSupport
import ContentStore
import Foundation

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput]
private let commitsPerSecond = BenchmarkMetric.custom("commits/s", polarity: .prefersLarger, useScalingFactor: false)

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var digest: Digest?
    var counter = 0
    var store: Store { fixture!.store }
}

private let blob = Data((0 ..< 4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
private let value = Data(repeating: 0x42, count: 100)

/// Asks the store's control socket for `stats` and reads the whole answer: what `contentstore stats`
/// does against a store a process holds (Docs/control-protocol.md), without the process start.
private func remoteStats(_ directory: String) throws -> Int {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let path = Array((directory + "/control.sock").utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path + [0]) }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    let request = Array(#"{"version":1,"command":"stats"}"#.utf8) + [10]
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var received = 0
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return received }
        received += count
    }
}

let benchmarks: @Sendable () -> Void = {
    let cached = State()
    let cachedSetup: () throws -> Void = {
        cached.fixture = try StoreFixture("async-get-cached")
        cached.digest = try cached.store.put(blob)
        _ = try cached.store.get(cached.digest!)
    }
    Benchmark("get 4 KiB cached, blocking",
              configuration: .init(metrics: metrics, maxDuration: .seconds(2), maxIterations: 200_000,
                                   setup: cachedSetup, teardown: { cached.fixture?.remove() })) { benchmark in
        do { blackHole(try cached.store.get(cached.digest!)) } catch { benchmark.error("\(error)") }
    }
    Benchmark("get 4 KiB cached, await",
              configuration: .init(metrics: metrics, maxDuration: .seconds(2), maxIterations: 200_000,
                                   setup: cachedSetup, teardown: { cached.fixture?.remove() })) { benchmark async in
        do { blackHole(try await cached.store.get(cached.digest!)) } catch { benchmark.error("\(error)") }
    }

    let writers = 16, perWriter = 32
    let threads = State()
    Benchmark("durable commits, \(writers) threads × \(perWriter)",
              configuration: .init(metrics: metrics + [commitsPerSecond], maxDuration: .seconds(4), maxIterations: 1000,
                                   setup: { threads.fixture = try StoreFixture("async-commits-threads") },
                                   teardown: { threads.fixture?.remove() })) { benchmark in
        let store = threads.store
        threads.counter += 1
        let round = threads.counter
        let start = monotonicNanoseconds()
        do {
            try runThreads(writers) { writer in
                for i in 0 ..< perWriter {
                    try store.write { try $0.setRecord(Record(value: value + [UInt8(truncatingIfNeeded: round)]), forKey: "w\(writer)/\(i)") }
                }
            }
        } catch { benchmark.error("\(error)") }
        benchmark.measurement(commitsPerSecond, Int(Double(writers * perWriter) / (Double(monotonicNanoseconds() - start) / 1e9)))
    }

    let tasks = State()
    Benchmark("durable commits, \(writers) tasks × \(perWriter), await",
              configuration: .init(metrics: metrics + [commitsPerSecond], maxDuration: .seconds(4), maxIterations: 1000,
                                   setup: { tasks.fixture = try StoreFixture("async-commits-tasks") },
                                   teardown: { tasks.fixture?.remove() })) { benchmark async in
        let store = tasks.store
        tasks.counter += 1
        let round = tasks.counter
        let start = monotonicNanoseconds()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0 ..< writers {
                    group.addTask {
                        for i in 0 ..< perWriter {
                            try await store.write { try $0.setRecord(Record(value: value + [UInt8(truncatingIfNeeded: round)]), forKey: "w\(writer)/\(i)") }
                        }
                    }
                }
                try await group.waitForAll()
            }
        } catch { benchmark.error("\(error)") }
        benchmark.measurement(commitsPerSecond, Int(Double(writers * perWriter) / (Double(monotonicNanoseconds() - start) / 1e9)))
    }

    let remote = State()
    Benchmark("remote stats over the control socket",
              configuration: .init(metrics: metrics, maxDuration: .seconds(2), maxIterations: 10_000,
                                   setup: { remote.fixture = try StoreFixture("async-remote-stats") },
                                   teardown: { remote.fixture?.remove() })) { benchmark in
        do { blackHole(try remoteStats(remote.fixture!.directory)) } catch { benchmark.error("\(error)") }
    }
}
