import BenchSupport
import ContentStore
import ContentStoreCluster
import Foundation
import PostgresNIO
import Synchronization

// Invariant: in every round each workload runs the cluster and its peer back to back against the
// same services, in an order that alternates by round, so a ratio compares like load with like.

/// One measured number per contender per round.
struct Row: Codable {
    var id: String
    var workload: String
    var unit: String
    var higherIsBetter: Bool
    var rounds: [String: [Double]] = [:]
    var note: String = ""

    mutating func record(_ contender: String, _ value: Double) { rounds[contender, default: []].append(value) }
}

enum Contender {
    static let cluster = "ContentStoreCluster"
    static let postgres = "PostgreSQL"
    static let restic = "restic"
}

/// 16 writers in 4 processes: `Store(cluster:)` commits against one autocommit INSERT … ON CONFLICT each.
struct CommitsWorkload {
    var processes: Int
    var writers: Int
    var seconds: Double
    var rate = Row(id: "cluster-commits", workload: "durable commits", unit: "commits/s", higherIsBetter: true)
    var p99 = Row(id: "cluster-commits-p99", workload: "durable commits: p99 latency (worst process)", unit: "ms", higherIsBetter: false)

    mutating func run(round: Int, services: ClusterServices) throws {
        for contender in rotated([Contender.cluster, Contender.postgres], by: round) {
            let database = try Peer.createDatabase(services, "cc_commits_r\(round)_\(contender == Contender.cluster ? "cluster" : "peer")")
            var environment = services.environment
            environment["CLUSTER_COMPARE_DATABASE_URL"] = database
            environment["CLUSTER_COMPARE_BUCKET"] = "cc-commits-r\(round)"
            if contender == Contender.cluster {
                // Schema and bucket made once here, not raced by four first opens.
                try openCluster(databaseURL: database, endpoint: services.endpoint, bucket: "cc-commits-r\(round)").close()
            } else {
                try Peer.execute(database, ["CREATE TABLE bench_commits (key text COLLATE \"C\" PRIMARY KEY, value bytea NOT NULL)"])
            }
            let mode = contender == Contender.cluster ? "cluster" : "postgres"
            let workers = try (0 ..< processes).map { try WorkerProcess(["commits", mode, "\(writers)", "\(seconds)", "\($0)"], environment: environment) }
            for worker in workers { _ = try worker.expect("ready") }
            for worker in workers { worker.send("go") }
            var count = 0.0, elapsed = 0.0, worstP99 = 0.0
            for worker in workers {
                let fields = try worker.expect("result").compactMap(Double.init)
                try worker.finish()
                guard fields.count == 4 else { throw WorkerFailed(description: "a commits worker printed \(fields)") }
                count += fields[0]
                elapsed = max(elapsed, fields[1])
                worstP99 = max(worstP99, fields[3] / 1000)
            }
            rate.record(contender, count / elapsed)
            p99.record(contender, worstP99)
            Progress.log(String(format: "round %d: %@ durable commits, %d writers in %d processes: %.0f/s (p99 %.1f ms)",
                                round + 1, contender, processes * writers, processes, count / elapsed, worstP99))
        }
    }
}

/// The compare corpus into the cluster (put + batched commits, as `compare`'s ContentStore contender)
/// against `restic backup` to a bucket on the same S3 server.
struct IngestWorkload {
    var corpus: Corpus
    var threads: Int
    var scratch: String
    var restic: String?
    var rate = Row(id: "cluster-ingest", workload: "bulk ingest", unit: "MB/s", higherIsBetter: true)
    var kdf = Row(id: "cluster-ingest-restic-kdf", workload: "restic's key derivation (`restic cat config`), included in its ingest", unit: "s", higherIsBetter: false)

    mutating func run(round: Int, services: ClusterServices) throws {
        let megabytes = Double(corpus.totalBytes) / 1e6
        _ = try corpus.readEveryFile()  // both read it from the page cache
        for contender in rotated([Contender.cluster, Contender.restic], by: round) {
            if contender == Contender.cluster {
                let database = try Peer.createDatabase(services, "cc_ingest_r\(round)")
                let store = try openCluster(databaseURL: database, endpoint: services.endpoint, bucket: "cc-ingest-r\(round)")
                let seconds = try measureSeconds { try ingest(into: store) }
                try store.close()
                rate.record(contender, megabytes / seconds)
                Progress.log(String(format: "round %d: %@ ingest %.1f MB/s (%.2f s, %d threads)", round + 1, contender, megabytes / seconds, seconds, threads))
            } else if let restic {
                let repository = "s3:\(services.endpoint.absoluteString)/cc-restic-r\(round)"
                var environment = services.environment
                environment["RESTIC_PASSWORD"] = "benchmark"
                environment["RESTIC_CACHE_DIR"] = scratch + "/restic-cache-r\(round)"
                environment["RESTIC_PROGRESS_FPS"] = "0"
                try runTool(restic, ["-r", repository, "init"], environment: environment)
                let seconds = try measureSeconds {
                    try runTool(restic, ["-r", repository, "backup", "--quiet", "--host", "bench", "."], environment: environment, directory: corpus.root)
                }
                let derivation = try measureSeconds { try runTool(restic, ["-r", repository, "cat", "config"], environment: environment) }
                rate.record(contender, megabytes / seconds)
                kdf.record(contender, derivation)
                Progress.log(String(format: "round %d: restic backup to S3 %.1f MB/s (%.2f s; key derivation %.2f s)", round + 1, megabytes / seconds, seconds, derivation))
            }
        }
    }

    /// `threads` threads, each: put(contentsOf:) per file, one commit per 64 files (a record per file).
    private func ingest(into store: Store) throws {
        let queue = WorkQueue(count: corpus.files.count)
        let corpus = corpus
        try runThreads(threads) { _ in
            var batch: [(String, Digest)] = []
            func commit() throws {
                try store.write { transaction in
                    for (path, digest) in batch { try transaction.setRecord(Record(references: [digest]), forKey: "files/" + path) }
                }
                batch.removeAll(keepingCapacity: true)
            }
            while let index = queue.next() {
                let digest = try store.put(contentsOf: URL(fileURLWithPath: corpus.absolutePath(index), isDirectory: false))
                batch.append((corpus.files[index].path, digest))
                if batch.count == 64 { try commit() }
            }
            if !batch.isEmpty { try commit() }
        }
    }
}

/// 4 KiB blobs read by a second instance (cold: its first read of each; warm: then at random) against
/// `SELECT data FROM bench_blobs WHERE digest = $1` on one connection.
struct ReadsWorkload {
    var blocks: [Data]
    var seconds: Double
    var digests: [Digest] = []
    var database = ""
    var coldRate = Row(id: "cluster-reads-cold", workload: "4 KiB point reads, cold (each blob's first read by a new instance)", unit: "ops/s", higherIsBetter: true)
    var coldP99 = Row(id: "cluster-reads-cold-p99", workload: "… cold: p99", unit: "µs", higherIsBetter: false)
    var warmRate = Row(id: "cluster-reads-warm", workload: "4 KiB point reads, warm (uniformly random, after the cold pass)", unit: "ops/s", higherIsBetter: true)
    var warmP99 = Row(id: "cluster-reads-warm-p99", workload: "… warm: p99", unit: "µs", higherIsBetter: false)

    init(blocks: [Data], seconds: Double, services: ClusterServices) throws {
        self.blocks = blocks
        self.seconds = seconds
        database = try Peer.createDatabase(services, "cc_reads")
        // The first instance stores the blobs (8 threads) and references them all; then it closes.
        let writer = try openCluster(databaseURL: database, endpoint: services.endpoint, bucket: "cc-reads")
        let stored = Mutex<[Digest?]>(Array(repeating: nil, count: blocks.count))
        let queue = WorkQueue(count: blocks.count)
        try runThreads(8) { _ in
            while let index = queue.next() {
                let digest = try writer.put(blocks[index])
                stored.withLock { $0[index] = digest }
            }
        }
        digests = stored.withLock { $0 }.compactMap { $0 }
        try writer.write { [digests] in try $0.setRecord(Record(references: digests), forKey: "reads") }
        try writer.close()
        let digestBytes = digests.map { Data(hexBytes: $0.hex) }
        try blocking { [database, blocks] in
            let connection = try await Peer.connect(database)
            _ = try await connection.query("CREATE TABLE bench_blobs (digest bytea PRIMARY KEY, data bytea NOT NULL)", logger: Peer.logger)
            _ = try await connection.query("BEGIN", logger: Peer.logger)
            for (digest, data) in zip(digestBytes, blocks) {
                _ = try await connection.query("INSERT INTO bench_blobs (digest, data) VALUES (\(digest), \(data))", logger: Peer.logger)
            }
            _ = try await connection.query("COMMIT", logger: Peer.logger)
            try await connection.close()
        }
    }

    mutating func run(round: Int, services: ClusterServices) throws {
        var random = DeterministicRandom(seed: UInt64(round) &+ 17)
        var order = Array(digests.indices)
        for i in order.indices.reversed() { order.swapAt(i, random.below(i + 1)) }
        let warmOrder = (0 ..< 1_000_000).map { _ in random.below(digests.count) }
        for contender in rotated([Contender.cluster, Contender.postgres], by: round) {
            let (cold, warm) = contender == Contender.cluster
                ? try clusterReads(order: order, warmOrder: warmOrder, services: services)
                : try postgresReads(order: order, warmOrder: warmOrder)
            coldRate.record(contender, cold.rate)
            coldP99.record(contender, cold.latencies.p99)
            warmRate.record(contender, warm.rate)
            warmP99.record(contender, warm.latencies.p99)
            Progress.log(String(format: "round %d: %@ 4 KiB reads: cold %.0f/s (p99 %.0f µs), warm %.0f/s (p99 %.0f µs)",
                                round + 1, contender, cold.rate, cold.latencies.p99, warm.rate, warm.latencies.p99))
        }
    }

    struct Pass { var rate: Double; var latencies: Summary }

    /// Reads `indices` in order until they run out or `seconds` pass.
    private static func pass(_ indices: [Int], seconds: Double, read: (Int) throws -> Int) throws -> Pass {
        var latencies: [Double] = []
        latencies.reserveCapacity(indices.count)
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var now = start
        for index in indices where now < deadline {
            guard try read(index) == 4096 else { throw WorkerFailed(description: "a 4 KiB read returned another size") }
            let after = monotonicNanoseconds()
            latencies.append(Double(after - now) / 1000)
            now = after
        }
        return Pass(rate: Double(latencies.count) / (Double(now - start) / 1e9), latencies: Summary(latencies))
    }

    private func clusterReads(order: [Int], warmOrder: [Int], services: ClusterServices) throws -> (Pass, Pass) {
        // A new instance each round: nothing of this round's reads is in its cache yet.
        let reader = try openCluster(databaseURL: database, endpoint: services.endpoint, bucket: "cc-reads")
        defer { try? reader.close() }
        let digests = digests
        let cold = try Self.pass(order, seconds: 3600) { try reader.get(digests[$0]).count }
        let warm = try Self.pass(warmOrder, seconds: seconds) { try reader.get(digests[$0]).count }
        return (cold, warm)
    }

    private func postgresReads(order: [Int], warmOrder: [Int]) throws -> (Pass, Pass) {
        let digestBytes = digests.map { Data(hexBytes: $0.hex) }
        let (database, seconds) = (database, seconds)
        return try blocking {
            let connection = try await Peer.connect(database)
            func read(_ index: Int) async throws -> Int {
                let rows = try await connection.query("SELECT data FROM bench_blobs WHERE digest = \(digestBytes[index])", logger: Peer.logger)
                var size = 0
                for try await data in rows.decode(Data.self) { size = data.count }
                return size
            }
            func pass(_ indices: [Int], seconds: Double) async throws -> Pass {
                var latencies: [Double] = []
                let start = monotonicNanoseconds()
                let deadline = start + UInt64(seconds * 1e9)
                var now = start
                for index in indices where now < deadline {
                    guard try await read(index) == 4096 else { throw WorkerFailed(description: "a 4 KiB SELECT returned another size") }
                    let after = monotonicNanoseconds()
                    latencies.append(Double(after - now) / 1000)
                    now = after
                }
                return Pass(rate: Double(latencies.count) / (Double(now - start) / 1e9), latencies: Summary(latencies))
            }
            let cold = try await pass(order, seconds: 3600)
            let warm = try await pass(warmOrder, seconds: seconds)
            try await connection.close()
            return (cold, warm)
        }
    }
}

/// Resident memory of a fresh instance (its own process) after listing every key and reading some
/// blobs of clusters of different sizes: it must not grow with the number of blobs.
struct MemoryWorkload {
    var sizes: [Int]
    var gets = 2_000
    var resident = Row(id: "cluster-memory", workload: "instance RSS after listing every key and 2,000 gets", unit: "MiB", higherIsBetter: false)
    var peak = Row(id: "cluster-memory-peak", workload: "… its peak RSS", unit: "MiB", higherIsBetter: false)

    mutating func run(services: ClusterServices) throws {
        for size in sizes {
            let database = try Peer.createDatabase(services, "cc_memory_\(size)")
            let bucket = "cc-memory-\(size)"
            let store = try openCluster(databaseURL: database, endpoint: services.endpoint, bucket: bucket)
            let fill = try measureSeconds { try Self.fill(store, blobs: size) }
            try store.close()
            var environment = services.environment
            environment["CLUSTER_COMPARE_DATABASE_URL"] = database
            let worker = try WorkerProcess(["memory", bucket, "\(size)", "\(gets)"], environment: environment)
            let fields = try worker.expect("result").compactMap(Double.init)
            try worker.finish()
            guard fields.count == 2 else { throw WorkerFailed(description: "the memory worker printed \(fields)") }
            resident.record("\(size) blobs", fields[0])
            peak.record("\(size) blobs", fields[1])
            Progress.log(String(format: "memory: %d blobs and records (filled in %.0f s): instance RSS %.1f MiB, peak %.1f MiB", size, fill, fields[0], fields[1]))
        }
    }

    /// `blobs` distinct 256-byte blobs, each referenced by a record `m/PP/NNNNNNNN` (16 threads).
    private static func fill(_ store: Store, blobs: Int) throws {
        let queue = WorkQueue(count: blobs)
        try runThreads(16) { _ in
            var batch: [(String, Digest)] = []
            func commit() throws {
                try store.write { transaction in
                    for (key, digest) in batch { try transaction.setRecord(Record(references: [digest]), forKey: key) }
                }
                batch.removeAll(keepingCapacity: true)
            }
            while let index = queue.next() {
                var bytes = Data(String(format: "memory blob %08d ", index).utf8)
                bytes.append(Data(repeating: UInt8(truncatingIfNeeded: index), count: 256 - bytes.count))
                batch.append((String(format: "m/%02d/%08d", index % 100, index), try store.put(bytes)))
                if batch.count == 250 { try commit() }
            }
            if !batch.isEmpty { try commit() }
        }
    }
}

/// `items` rotated by `round`, so each contender takes each position in turn.
func rotated<T>(_ items: [T], by round: Int) -> [T] {
    let k = round % items.count
    return Array(items[k...] + items[..<k])
}

/// Runs a command-line tool; throws with its stderr's tail when it fails.
func runTool(_ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw WorkerFailed(description: "\(executable) \(arguments.prefix(3).joined(separator: " ")) exited \(process.terminationStatus): \(String(decoding: message, as: UTF8.self).suffix(600))")
    }
}
