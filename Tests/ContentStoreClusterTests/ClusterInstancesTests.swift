import ContentStore
import ContentStoreCluster
import Foundation
import Testing

/// Several instances on one cluster: in one process, and in processes of their own
/// (Tests/ClusterWorkload). A commit on one is seen by the next read of every other; counts are
/// exact; read-modify-write bodies lose no update.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterInstancesTests {
    static let workload: URL? = {
        var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
        for bundle in [Bundle.main] + Bundle.allBundles {
            directories += [bundle.bundleURL, bundle.bundleURL.deletingLastPathComponent()]
        }
        return directories.map { $0.appendingPathComponent("ClusterWorkload") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    /// Increments per process: 250 in `make test`; `CONTENTSTORE_TEST_CLUSTER_INCREMENTS=1000` for the full run.
    static let incrementsPerProcess = ProcessInfo.processInfo.environment["CONTENTSTORE_TEST_CLUSTER_INCREMENTS"].flatMap(Int.init) ?? 250

    @Test func twoInstancesInOneProcessSeeEachOthersCommits() async throws {
        try await withStore(.cluster) { first, location in
            let second = try await location.open()
            defer { try? second.close() }
            let blob = try await first.put(Data("shared".utf8))
            try await first.write { try $0.setRecord(Record(value: Data("from first".utf8), references: [blob, blob]), forKey: "k") }
            #expect(try await second.record(forKey: "k")?.value == Data("from first".utf8))
            #expect(second.refCount(of: blob) == 2)
            #expect(try await second.get(blob) == Data("shared".utf8))
            try await second.write { transaction in
                let record = try #require(try transaction.record(forKey: "k"))
                try transaction.setRecord(Record(value: record.value + Data(" and second".utf8), references: [blob]), forKey: "k")
            }
            #expect(try await first.record(forKey: "k")?.value == Data("from first and second".utf8))
            #expect(first.refCount(of: blob) == 1)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in [first, second, first, second] {
                    group.addTask { for _ in 0 ..< 20 { try EngineContractTests.increment(store, key: "n") } }
                }
                try await group.waitForAll()
            }
            #expect(try EngineContractTests.counter(second, key: "n") == 80)
            #expect(try await first.verify().isClean)
        }
    }

    /// Concurrent writers of one instance share group transactions (§5.2: one read, one write per
    /// group, each member decided in memory over the rows and the members before it). Members that
    /// rewrite one key's references, members that reference a blob the store lacks, and
    /// read-modify-write members in the same groups: counts stay exact, `missingBlob` fails only
    /// its own writer, and no increment is lost.
    @Test func concurrentWritersOfOneInstanceShareGroupsExactly() async throws {
        try await withStore(.cluster) { store, _ in
            var stored: [Digest] = []
            for index in 0 ..< 4 { stored.append(try await store.put(Data("blob \(index)".utf8))) }
            let blobs = stored
            let absent = Digest(hex: String(repeating: "ab", count: 32))!
            let missing = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0 ..< 8 {
                    // Threads of their own: blocked writers must not hold the cooperative pool's
                    // two threads, or no group ever holds more than two members.
                    group.addTask { try await onThread {
                        var missing = 0
                        for round in 0 ..< 25 {
                            // Every writer rewrites the shared keys, so one group often holds two
                            // writes of a key: each reference must be counted once, against the
                            // record the member before it left.
                            let shared = "shared/\(round % 2)"
                            let references = [blobs[(writer + round) % 4], blobs[round % 4]]
                            try store.write { try $0.setRecord(Record(value: Data("\(writer) \(round)".utf8), references: references), forKey: shared) }
                            try EngineContractTests.increment(store, key: "counter")
                            if round % 5 == writer % 5 {
                                do {
                                    try store.write { try $0.setRecord(Record(value: Data(), references: [blobs[0], absent]), forKey: "absent/\(writer)") }
                                } catch let error as StoreError where error.code == .missingBlob {
                                    missing += 1
                                }
                            }
                        }
                        return missing
                    } }
                }
                return try await group.reduce(0, +)
            }
            #expect(missing == 8 * 5)
            #expect(try EngineContractTests.counter(store, key: "counter") == 8 * 25)
            #expect(try await store.record(forKey: "absent/0") == nil)
            var expected: [Digest: Int] = [:]
            for key in try await store.keys(withPrefix: "shared/") {
                for digest in try #require(try await store.record(forKey: key)).references { expected[digest, default: 0] += 1 }
            }
            for digest in blobs { #expect(store.refCount(of: digest) == expected[digest, default: 0], "\(digest)") }
            #expect(try await store.verify().isClean)
        }
    }

    @Test func fourProcessesIncrementingOneKeyLoseNoUpdate() async throws {
        let executable = try #require(Self.workload, "ClusterWorkload was not found beside the tests; build it (swift build --build-tests)")
        let environment = try ClusterTestEnvironment.required()
        try await withStore(.cluster) { store, location in
            let cluster = try #require(location.cluster)
            var processes: [Process] = []
            for _ in 0 ..< 4 {
                let process = Process()
                process.executableURL = executable
                process.arguments = ["increment", "counter", String(Self.incrementsPerProcess)]
                process.environment = ProcessInfo.processInfo.environment.merging([
                    "CONTENTSTORE_TEST_WORKLOAD_DATABASE_URL": cluster.databaseURL,
                    "CONTENTSTORE_S3_ENDPOINT": cluster.objectStoreEndpoint.absoluteString,
                    "CONTENTSTORE_S3_BUCKET": cluster.bucket,
                    "AWS_ACCESS_KEY_ID": environment.accessKeyID,
                    "AWS_SECRET_ACCESS_KEY": environment.secretAccessKey,
                ]) { $1 }
                try process.run()
                processes.append(process)
            }
            for process in processes {
                while process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
                #expect(process.terminationStatus == 0)
            }
            #expect(try EngineContractTests.counter(store, key: "counter") == 4 * Self.incrementsPerProcess)
        }
    }
}
