// The async API's overhead (issue 15): `await get` of a cached 4 KiB blob against the blocking get
// (target: within 2 µs), 16 tasks awaiting durable commits against 16 threads committing (target:
// ≥ 90% of their rate), a `stats` request over the control socket (target: ≤ 5 ms), and a gc of 1%
// garbage in a store of 1,000,000 small blobs asked for over the control socket against the same gc
// called in-process (target: at most 10 ms more; CONTENTSTORE_BENCH_REMOTE_GC_BLOBS sets the size).
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

/// Sends `request` to the store's control socket and reads the whole answer: what `contentstore stats`
/// or `gc` does against a store a process holds (Docs/control-protocol.md), without the process start.
@discardableResult
private func askControlSocket(_ request: String, _ directory: String) throws -> String {
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
    let line = Array(request.utf8) + [10]
    _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { break }
        received += buffer[..<count]
    }
    let answer = String(decoding: received, as: UTF8.self)
    guard answer.contains(#""type":"result""#) else { throw RemoteFailure(answer: answer) }
    return answer
}

private struct RemoteFailure: Error, CustomStringConvertible {
    let answer: String
    var description: String { "the control socket answered: \(answer)" }
}

private let remoteGCBlobs = ProcessInfo.processInfo.environment["CONTENTSTORE_BENCH_REMOTE_GC_BLOBS"].flatMap { Int($0) } ?? 1_000_000
private let inProcessGC = BenchmarkMetric.custom("in-process gc (µs)", polarity: .prefersSmaller, useScalingFactor: false)
private let remoteGC = BenchmarkMetric.custom("remote gc (µs)", polarity: .prefersSmaller, useScalingFactor: false)
private let remoteExtra = BenchmarkMetric.custom("remote − in-process, paired (µs)", polarity: .prefersSmaller, useScalingFactor: false)

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
        do { blackHole(try askControlSocket(#"{"version":1,"command":"stats"}"#, remote.fixture!.directory)) } catch { benchmark.error("\(error)") }
    }

    // Each iteration collects 1% garbage twice, once in-process and once over the socket (their order
    // alternating), dropping the records of 10,000 blobs before each and putting as many new ones back
    // after it (not measured), so both collections see the same store size and garbage.
    let collected = State()
    let perRecord = 100
    let garbage = remoteGCBlobs / 100
    Benchmark("gc of 1% garbage in \(remoteGCBlobs) blobs: in-process and remote, paired",
              configuration: .init(metrics: [inProcessGC, remoteGC, remoteExtra], warmupIterations: 1,
                                   maxDuration: .seconds(60), maxIterations: 8,
                                   setup: {
                                       let fixture = try StoreFixture("async-remote-gc", configuration: StoreFixture.smallBlobConfiguration())
                                       try fixture.populate(blobs: remoteGCBlobs, size: 128, perRecord: perRecord, log: true)
                                       collected.fixture = fixture
                                   },
                                   teardown: { collected.fixture?.remove() })) { benchmark in
        guard let fixture = collected.fixture else { return }
        do {
            var random = DeterministicRandom(seed: 15 &+ UInt64(collected.counter))
            func collect(remotely: Bool) throws -> Int {
                let live = (0 ..< fixture.groups.count).filter { (try? fixture.store.record(forKey: StoreFixture.groupKey($0))) != nil }
                var chosen = live
                for i in chosen.indices.reversed() { chosen.swapAt(i, random.below(i + 1)) }
                try fixture.dropGroups(Array(chosen.prefix(garbage / perRecord)))
                let start = monotonicNanoseconds()
                if remotely {
                    try askControlSocket(#"{"version":1,"command":"gc","gracePeriodSeconds":0}"#, fixture.directory)
                } else {
                    var options = GarbageCollectionOptions()
                    options.gracePeriod = .zero
                    _ = try fixture.store.collectGarbage(options)
                }
                let elapsed = Int((monotonicNanoseconds() - start) / 1000)
                collected.counter += 1
                try fixture.populate(blobs: garbage, size: 128, perRecord: perRecord, seed: 1_000_000 &+ UInt64(collected.counter))
                return elapsed
            }
            let remoteFirst = collected.counter % 4 == 0
            let first = try collect(remotely: remoteFirst)
            let second = try collect(remotely: !remoteFirst)
            let (local, remoteTime) = remoteFirst ? (second, first) : (first, second)
            benchmark.measurement(inProcessGC, local)
            benchmark.measurement(remoteGC, remoteTime)
            benchmark.measurement(remoteExtra, max(0, remoteTime - local))
        } catch { benchmark.error("\(error)") }
    }
}
