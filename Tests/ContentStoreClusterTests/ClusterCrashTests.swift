#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import ContentStoreCluster
import Foundation
import PostgresNIO
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
            let deadline = ContinuousClock.now + .seconds(Self.seconds)
            var generation = 0
            var collections = 0
            let collector = Task {
                try await onThread {
                    var statuses: [Int32] = []
                    // At least once: on a machine whose cooperative pool is held by other suites'
                    // synchronous tests, this task may start only after the writers' deadline.
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
            }
            while ContinuousClock.now < deadline {
                var running: [Process] = []
                for writer in 0 ..< 4 {
                    let process = Process()
                    process.executableURL = workload
                    process.arguments = ["write", "g\(generation)w\(writer)"]
                    process.environment = childEnvironment
                    _ = FileManager.default.createFile(atPath: outputs.appendingPathComponent("g\(generation)w\(writer)").path, contents: nil)
                    process.standardOutput = try FileHandle(forWritingTo: outputs.appendingPathComponent("g\(generation)w\(writer)"))
                    try process.run()
                    running.append(process)
                }
                try await Task.sleep(for: .milliseconds(Int64.random(in: 800 ... 2500)))
                for process in running.shuffled() {
                    kill(process.processIdentifier, SIGKILL)
                    try await Task.sleep(for: .milliseconds(Int64.random(in: 0 ... 200)))
                }
                for process in running { while process.isRunning { try await Task.sleep(for: .milliseconds(20)) } }
                generation += 1
            }
            let statuses = try await collector.value
            collections = statuses.count
            #expect(statuses.allSatisfy { $0 == 0 || $0 == 3 }, "gc exits 0, or 3 when another collection runs: \(statuses)")
            #expect(collections > 0)

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
            for (key, digest) in acknowledged {
                #expect(try await store.record(forKey: key)?.references == [digest], "acknowledged \(key) is present")
                #expect(store.refCount(of: digest) >= 1)
                #expect(try await store.get(digest).count > 0)
            }
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
