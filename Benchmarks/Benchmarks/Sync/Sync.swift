// Sync (issue 22) over HTTP on loopback: a client's initial sync of 10,000 objects (1 KiB bodies,
// 10% with a 256 KiB attachment, half of those attachments duplicates) to a fresh server, with the
// bytes it sent against a naive client that uploads every body and attachment; and an incremental
// sync after 10 changes in a synced set of 10,000 objects (target: ≤ 50 ms).
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Sync

private let objectCount = 10_000
private let bytesSent = BenchmarkMetric.custom("bytes sent, % of a naive client's", polarity: .prefersSmaller, useScalingFactor: false)

/// A server on its own store and a client on another, on 127.0.0.1.
private final class SyncBench: @unchecked Sendable {
    var serverStore: StoreFixture?
    var clientStore: StoreFixture?
    var serverTask: Task<Void, any Error>?
    var client: SyncClient?
    var counter = 0

    func setUp(_ name: String) async throws {
        let serverStore = try StoreFixture(name + "-server")
        let clientStore = try StoreFixture(name + "-client")
        let server = SyncServer(store: serverStore.store)
        serverTask = Task { try await server.run() }
        var configuration = SyncConfiguration()
        configuration.syncsAutomatically = false
        client = try SyncClient(local: clientStore.store, server: URL(string: "http://127.0.0.1:\(try await server.port)")!,
                                clientID: name, configuration: configuration)
        self.serverStore = serverStore
        self.clientStore = clientStore
    }

    /// Persists the corpus locally; returns what a naive client would upload (every body and attachment).
    func persistCorpus() async throws -> Int {
        var generator = ContentGenerator(seed: 22)
        let body = Data(generator.textBlock(size: 1024))
        let attachments = (0 ..< objectCount / 20).map { index -> Data in
            var data = Data(generator.textBlock(size: 256 * 1024))
            withUnsafeBytes(of: UInt64(index)) { data.replaceSubrange(0 ..< 8, with: $0) }
            return data
        }
        var naive = 0
        for index in 0 ..< objectCount {
            var object = SyncObject(container: "bench", id: "object-\(index)", body: body + Data("\(index)".utf8))
            if index % 10 == 0 { object.attachments["file"] = attachments[(index / 10) % attachments.count] }
            naive += object.body.count + object.attachments.values.reduce(0) { $0 + $1.count }
            try await client!.persist(object)
        }
        return naive
    }

    func tearDown() {
        serverTask?.cancel()
        client = nil
        serverStore?.remove()
        clientStore?.remove()
    }
}

let benchmarks: @Sendable () -> Void = {
    let initial = SyncBench()
    Benchmark(
        "initial sync of 10,000 objects",
        configuration: .init(metrics: [.wallClock, bytesSent], maxDuration: .seconds(60), maxIterations: 1,
                             teardown: { initial.tearDown() })
    ) { benchmark in
        do {
            try await initial.setUp("sync-initial")
            let naive = try await initial.persistCorpus()
            benchmark.startMeasurement()
            let report = try await initial.client!.sync()
            benchmark.stopMeasurement()
            benchmark.measurement(bytesSent, Int(report.bytesSent * 100 / Int64(naive)))
        } catch { benchmark.error("\(error)") }
    }

    let incremental = SyncBench()
    Benchmark(
        "incremental sync after 10 changes in 10,000 objects",
        configuration: .init(metrics: [.wallClock], maxDuration: .seconds(10), maxIterations: 50,
                             setup: {
                                 try await incremental.setUp("sync-incremental")
                                 _ = try await incremental.persistCorpus()
                                 _ = try await incremental.client!.sync()
                             },
                             teardown: { incremental.tearDown() })
    ) { benchmark in
        do {
            for _ in 0 ..< 10 {
                incremental.counter += 1
                try await incremental.client!.persist(SyncObject(container: "bench", id: "object-\(incremental.counter % objectCount)",
                                                                 body: Data("change \(incremental.counter)".utf8)))
            }
            benchmark.startMeasurement()
            _ = try await incremental.client!.sync()
            benchmark.stopMeasurement()
        } catch { benchmark.error("\(error)") }
    }
}
