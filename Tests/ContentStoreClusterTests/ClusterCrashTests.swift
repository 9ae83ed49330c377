#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import ContentStoreCluster
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// Four writer processes (Tests/ClusterWorkload) killed with SIGKILL at random moments while
/// `contentstore gc --grace 2s` runs in a loop beside them: afterwards every acknowledged commit is
/// present with its blob, counts equal references, `verify --read-data` is clean, and no orphaned
/// upload older than the grace period is left.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterCrashTests {
    static func executable(_ name: String) -> URL? {
        var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
        for bundle in [Bundle.main] + Bundle.allBundles {
            directories += [bundle.bundleURL, bundle.bundleURL.deletingLastPathComponent()]
        }
        return directories.map { $0.appendingPathComponent(name) }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// Seconds of killing: 10 in `make test`; `CONTENTSTORE_TEST_CLUSTER_CRASH_SECONDS` for longer runs.
    static let seconds = ProcessInfo.processInfo.environment["CONTENTSTORE_TEST_CLUSTER_CRASH_SECONDS"].flatMap(Double.init) ?? 10

    @Test(.timeLimit(.minutes(8)))
    func killedWritersBesideACollectorLoseNothingAcknowledged() async throws {
        let workload = try #require(Self.executable("ClusterWorkload"), "ClusterWorkload was not found beside the tests")
        let command = try #require(Self.executable("contentstore"), "contentstore was not found beside the tests")
        let environment = try ClusterTestEnvironment.required()
        let outputs = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outputs) }
        try await withStore(.cluster) { store, location in
            let cluster = try #require(location.cluster)
            let childEnvironment = ProcessInfo.processInfo.environment.merging([
                "CONTENTSTORE_TEST_WORKLOAD_DATABASE_URL": cluster.databaseURL,
                "CONTENTSTORE_S3_ENDPOINT": cluster.objectStoreEndpoint.absoluteString,
                "CONTENTSTORE_S3_BUCKET": cluster.bucket,
                "AWS_ACCESS_KEY_ID": environment.accessKeyID,
                "AWS_SECRET_ACCESS_KEY": environment.secretAccessKey,
            ]) { $1 }
            // Writers, killer and collector each on a thread of their own, never on the cooperative
            // pool: when other suites' synchronous tests hold the pool (two threads on two cores),
            // a killer waiting there to resume lets the writers run on unkilled for minutes, and
            // everything after (checks, verify) grows with what they wrote.
            let deadline = ContinuousClock.now + .seconds(Self.seconds)
            async let collectorStatuses = onThread {
                var statuses: [Int32] = []
                repeat {
                    let process = Process()
                    process.executableURL = command
                    process.arguments = ["gc", "--store", cluster.databaseURL, "--grace", "2s", "--json"]
                    process.environment = childEnvironment
                    process.standardOutput = FileHandle.nullDevice
                    try? process.run()
                    process.waitUntilExit()
                    statuses.append(process.terminationStatus)
                } while ContinuousClock.now < deadline
                return statuses
            }
            try await onThread {
                var generation = 0
                while ContinuousClock.now < deadline {
                    var running: [Process] = []
                    for writer in 0 ..< 4 {
                        let process = Process()
                        process.executableURL = workload
                        process.arguments = ["write", "g\(generation)w\(writer)"]
                        process.environment = childEnvironment
                        let output = outputs.appendingPathComponent("g\(generation)w\(writer)")
                        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
                        process.standardOutput = try FileHandle(forWritingTo: output)
                        try process.run()
                        running.append(process)
                    }
                    Thread.sleep(forTimeInterval: Double.random(in: 0.8 ... 2.5))
                    for process in running.shuffled() {
                        kill(process.processIdentifier, SIGKILL)
                        Thread.sleep(forTimeInterval: Double.random(in: 0 ... 0.2))
                    }
                    for process in running { process.waitUntilExit() }
                    generation += 1
                }
            }
            let statuses = try await collectorStatuses
            #expect(statuses.allSatisfy { $0 == 0 || $0 == 3 }, "gc exits 0, or 3 when another collection runs: \(statuses)")
            #expect(statuses.count > 0)

            var acknowledged: [(key: String, digest: Digest)] = []
            for file in try FileManager.default.contentsOfDirectory(atPath: outputs.path) {
                let text = try String(contentsOf: outputs.appendingPathComponent(file), encoding: .utf8)
                // A line without its newline was cut by the kill: not acknowledged.
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
                    let fields = line.split(separator: " ")
                    guard fields.count == 3, fields[0] == "acked", let digest = Digest(hex: String(fields[2])) else { continue }
                    acknowledged.append((String(fields[1]), digest))
                }
            }
            #expect(acknowledged.count > 0)
            // Four threads of blocking reads: each check is a round trip or two, and there are hundreds.
            let missing = try await onThread { [acknowledged] in
                let failures = Mutex<[String]>([])
                DispatchQueue.concurrentPerform(iterations: 4) { part in
                    for index in stride(from: part, to: acknowledged.count, by: 4) {
                        let (key, digest) = acknowledged[index]
                        let present = (try? store.record(forKey: key))?.references == [digest]
                        if !present || store.refCount(of: digest) < 1 || ((try? store.get(digest))?.count ?? 0) == 0 {
                            failures.withLock { $0.append(key) }
                        }
                    }
                }
                return failures.withLock { $0 }
            }
            #expect(missing.isEmpty, "acknowledged commits missing, unreferenced or unreadable: \(missing.prefix(20))")
            let report = try await store.verify(VerificationOptions(readData: true))
            #expect(report.isClean, "\(report.problems)")

            // After the grace period, one more collection leaves no orphaned upload behind.
            try await Task.sleep(for: .seconds(3))
            _ = try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(2)))
            let orphans = try await environment.withClient(cluster.databaseURL) { client in
                for try await count in try await client.query("SELECT count(*) FROM contentstore.packs WHERE state = 0 AND created_at < now() - interval '2 seconds'").decode(Int64.self) {
                    return count
                }
                return -1
            }
            #expect(orphans == 0)
            #expect(try await store.verify().isClean)
        }
    }
}
