import BenchSupport
import ContentStore
import ContentStoreCluster
import Foundation
import Logging
import Synchronization

// Invariant: a worker process reports only what it measured between the parent's "go" and its own
// deadline, so the parent can add up processes that opened their stores at different speeds.
//
//   cluster-compare worker commits cluster|postgres WRITERS SECONDS PROCESS
//       opens Store(cluster:) (or WRITERS postgres-nio connections), prints "ready", waits for a
//       line on stdin, then WRITERS threads commit for SECONDS; prints "result COUNT SECONDS P50 P99"
//   cluster-compare worker memory BUCKET KEYS GETS
//       opens a fresh instance, lists every key (in 100 prefixes), gets GETS blobs, prints "result RSS_MIB PEAK_MIB"
// The cluster comes from CLUSTER_COMPARE_DATABASE_URL, CLUSTER_COMPARE_S3_ENDPOINT and the AWS_* variables.

enum Worker {
    static func main(_ arguments: [String]) -> Never {
        do {
            switch (arguments.first, arguments.count) {
            case ("commits", 5):
                guard let writers = Int(arguments[2]), let seconds = Double(arguments[3]), let process = Int(arguments[4]) else { usage() }
                let outcome = arguments[1] == "cluster"
                    ? try clusterCommits(writers: writers, seconds: seconds, process: process)
                    : try postgresCommits(writers: writers, seconds: seconds, process: process)
                print("result \(outcome.count) \(outcome.seconds) \(outcome.latencies.median) \(outcome.latencies.p99)")
            case ("memory", 4):
                guard let keys = Int(arguments[2]), let gets = Int(arguments[3]) else { usage() }
                let (rss, peak) = try memory(bucket: arguments[1], keys: keys, gets: gets)
                print("result \(rss) \(peak)")
            default: usage()
            }
            fflush(nil)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("cluster-compare worker: \(error)\n".utf8))
            exit(1)
        }
    }

    private static func usage() -> Never {
        FileHandle.standardError.write(Data("usage: cluster-compare worker commits cluster|postgres WRITERS SECONDS PROCESS | memory BUCKET KEYS GETS\n".utf8))
        exit(64)
    }

    static func cluster(bucket: String, readCacheMiB: Int? = nil) throws -> Store {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["CLUSTER_COMPARE_DATABASE_URL"],
              let endpoint = environment["CLUSTER_COMPARE_S3_ENDPOINT"].flatMap(URL.init(string:)) else {
            throw ServicesUnavailable(reason: "CLUSTER_COMPARE_DATABASE_URL and CLUSTER_COMPARE_S3_ENDPOINT are not set")
        }
        return try openCluster(databaseURL: url, endpoint: endpoint, bucket: bucket, readCacheMiB: readCacheMiB)
    }

    /// Prints "ready" and waits for the parent's go-ahead on stdin.
    private static func awaitStart() {
        print("ready")
        fflush(nil)
        _ = readLine()
    }

    struct Outcome { var count: Int; var seconds: Double; var latencies: Summary }

    /// WRITERS threads, each committing one 100-byte record per `write` until the deadline.
    private static func timed(writers: Int, seconds: Double, process: Int, commit: @escaping @Sendable (String, Data) throws -> Void) throws -> Outcome {
        awaitStart()
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let latencies = Mutex<[Double]>([])
        try runThreads(writers) { writer in
            var mine: [Double] = []
            var value = Data((0 ..< 100).map { UInt8(truncatingIfNeeded: $0 &* 37) })
            var count = 0
            var now = monotonicNanoseconds()
            while now < deadline {
                // A new value every time: an unchanged set could be skipped.
                value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(count), as: UInt64.self) }
                try commit("p\(process)w\(writer)/key\(count % 1024)", value)
                let after = monotonicNanoseconds()
                mine.append(Double(after - now) / 1000)
                now = after
                count += 1
            }
            latencies.withLock { $0 += mine }
        }
        let all = latencies.withLock { $0 }
        return Outcome(count: all.count, seconds: Double(monotonicNanoseconds() - start) / 1e9, latencies: Summary(all))
    }

    private static func clusterCommits(writers: Int, seconds: Double, process: Int) throws -> Outcome {
        let store = try cluster(bucket: ProcessInfo.processInfo.environment["CLUSTER_COMPARE_BUCKET"] ?? "cc-commits")
        let outcome = try timed(writers: writers, seconds: seconds, process: process) { key, value in
            try store.write { try $0.setRecord(Record(value: value), forKey: key) }
        }
        try store.close()
        return outcome
    }

    private static func postgresCommits(writers: Int, seconds: Double, process: Int) throws -> Outcome {
        guard let url = ProcessInfo.processInfo.environment["CLUSTER_COMPARE_DATABASE_URL"] else {
            throw ServicesUnavailable(reason: "CLUSTER_COMPARE_DATABASE_URL is not set")
        }
        let connections = try blocking {
            var opened: [PostgresConnectionBox] = []
            for id in 0 ..< writers {
                let connection = try await Peer.connect(url, id: id)
                // The server default, said explicitly: COMMIT returns once the WAL is flushed.
                _ = try await connection.query("SET synchronous_commit = on", logger: Peer.logger)
                opened.append(PostgresConnectionBox(connection: connection))
            }
            return opened
        }
        awaitStart()
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        // Each writer an async loop on its own connection: no thread hop per commit, the peer's best case.
        let latencies = try blocking {
            try await withThrowingTaskGroup(of: [Double].self) { group in
                for writer in 0 ..< writers {
                    let connection = connections[writer].connection
                    group.addTask {
                        var mine: [Double] = []
                        var value = Data((0 ..< 100).map { UInt8(truncatingIfNeeded: $0 &* 37) })
                        var now = monotonicNanoseconds()
                        while now < deadline {
                            value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(mine.count), as: UInt64.self) }
                            let key = "p\(process)w\(writer)/key\(mine.count % 1024)"
                            // One autocommit statement: one transaction, one round trip.
                            _ = try await connection.query(
                                "INSERT INTO bench_commits (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                                logger: Peer.logger)
                            let after = monotonicNanoseconds()
                            mine.append(Double(after - now) / 1000)
                            now = after
                        }
                        return mine
                    }
                }
                return try await group.reduce(into: [Double]()) { $0 += $1 }
            }
        }
        let outcome = Outcome(count: latencies.count, seconds: Double(monotonicNanoseconds() - start) / 1e9, latencies: Summary(latencies))
        try blocking { for box in connections { try await box.connection.close() } }
        return outcome
    }

    private static func memory(bucket: String, keys: Int, gets: Int) throws -> (Double, Double) {
        let store = try cluster(bucket: bucket)
        var listed = 0
        var digests: [Digest] = []
        for prefix in 0 ..< 100 {
            let batch = try store.keys(withPrefix: String(format: "m/%02d", prefix))
            listed += batch.count
            if digests.count < gets, let key = batch.first, let record = try store.record(forKey: key) {
                digests += record.references
            }
        }
        guard listed == keys else { throw ServicesUnavailable(reason: "listed \(listed) keys, expected \(keys)") }
        var random = DeterministicRandom(seed: 7)
        for _ in 0 ..< gets where !digests.isEmpty { _ = try store.get(digests[random.below(digests.count)]) }
        let resident = residentMiB()
        try store.close()
        return resident
    }
}

import PostgresNIO
/// A connection handed to writer threads (each uses only its own).
struct PostgresConnectionBox: Sendable { let connection: PostgresConnection }

/// A cluster store with the harness's settings: warnings only on stderr, no control socket.
func openCluster(databaseURL: String, endpoint: URL, bucket: String, readCacheMiB: Int? = nil) throws -> Store {
    var configuration = Store.Configuration()
    configuration.logger.logLevel = .warning
    // CLUSTER_COMPARE_LOG_LEVEL=debug: the engine's per-group commit lines (members, statements,
    // attempts, queue wait, time in PostgreSQL) on stderr, for Docs/benchmarks/analysis.md's counts.
    if let level = ProcessInfo.processInfo.environment["CLUSTER_COMPARE_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) {
        configuration.logger = Logger(label: "ContentStoreCluster", factory: { StreamLogHandler.standardError(label: $0) })
        configuration.logger.logLevel = level
    }
    configuration.controlSocket = false
    if let readCacheMiB { configuration.readCacheSize = readCacheMiB << 20 }
    return try Store(cluster: ClusterConfiguration(databaseURL: databaseURL, objectStoreEndpoint: endpoint, bucket: bucket),
                     configuration: configuration)
}
