import ContentStore
import ContentStoreCluster
import Foundation
import PostgresNIO
import Testing

/// A cluster store under faults of its services: refused credentials, the object store stopped
/// and started, PostgreSQL restarted with `-m immediate` during commits. Tests that stop a service
/// run a private instance of it, so other tests keep theirs.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterFaultTests {
    func configuration(_ environment: ClusterTestEnvironment, database: String, endpoint: URL? = nil) -> ClusterConfiguration {
        var cluster = ClusterConfiguration(databaseURL: database, objectStoreEndpoint: endpoint ?? environment.s3Endpoint,
                                           bucket: ClusterTestEnvironment.uniqueBucket())
        cluster.accessKeyID = environment.accessKeyID
        cluster.secretAccessKey = environment.secretAccessKey
        cluster.requestTimeout = .seconds(20)
        return cluster
    }

    @Test func wrongSecretIsAClearErrorAndWritesNothing() async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        defer { Task { await environment.dropDatabase(url) } }
        var cluster = configuration(environment, database: url)
        cluster.secretAccessKey = "not-the-secret-\(UUID().uuidString)"
        let error = await #expect(throws: StoreError.self) { try await Store(cluster: cluster, configuration: StoreLocation.configuration) }
        #expect(error?.code == .invalidArgument)
        let text = "\(error!)"
        #expect(text.contains(environment.accessKeyID))
        #expect(!text.contains(cluster.secretAccessKey))
        let schema = try await environment.withClient(url) { client in
            for try await exists in try await client.query("SELECT to_regclass('contentstore.schema_version') IS NOT NULL").decode(Bool.self) {
                return exists
            }
            return true
        }
        #expect(!schema, "nothing is written to the database")
    }

    @Test(.disabled("hangs after the service comes back (seen 2026-11-27, cause not yet found); see Docs/cluster.md §12"), .timeLimit(.minutes(8)))
    func objectStoreStoppedThenStartedIsUnavailableThenWorks() async throws {
        let environment = try ClusterTestEnvironment.required()
        try await withScratchDirectory(stopping: "stop-s3", environment) { directory in
            try await environment.services("start-s3", directory)
            let ports = try String(contentsOfFile: directory + "/s3/ports", encoding: .utf8).split(separator: " ")
            let endpoint = URL(string: "http://127.0.0.1:\(ports[6].trimmingCharacters(in: .whitespacesAndNewlines))")!
            let url = try await environment.makeDatabase()
            defer { Task { await environment.dropDatabase(url) } }
            let store = try await Store(cluster: configuration(environment, database: url, endpoint: endpoint),
                                        configuration: StoreLocation.configuration)
            defer { try? store.close() }
            let before = EngineContractTests.randomData(100_000)
            let digest = try await store.put(before)

            try await environment.services("stop-s3", directory)
            let error = #expect(throws: StoreError.self) { try store.put(EngineContractTests.randomData(100_000)) }
            #expect(error?.code == .unavailable)
            #expect(!"\(error!)".contains(environment.secretAccessKey))
            // Small blobs and records live in PostgreSQL: they still work.
            let small = try await store.put(Data("small".utf8))
            try await store.write { try $0.setRecord(Record(references: [small, digest]), forKey: "k") }

            try await environment.services("start-s3", directory)
            let after = EngineContractTests.randomData(100_000)
            try await eventually(within: .seconds(180)) { _ = try await store.put(after) }
            #expect(try await store.get(Digest.sha256(after)) == after)
            #expect(try await store.get(digest) == before)
            #expect(try await store.verify(VerificationOptions(readData: true)).isClean)
        }
    }

    /// Writers commit distinct keys while PostgreSQL is restarted with `-m immediate`: every
    /// acknowledged commit survives; a failed one is absent unless its outcome was reported unknown;
    /// counts stay exact.
    @Test(.disabled("hangs after the service comes back (seen 2026-11-27, cause not yet found); see Docs/cluster.md §12"), .timeLimit(.minutes(8)))
    func postgresRestartedDuringCommitsLosesNoAcknowledgedCommit() async throws {
        let environment = try ClusterTestEnvironment.required()
        try await withScratchDirectory(stopping: "stop-postgres", environment) { directory in
            try await environment.services("start-postgres", directory)
            let port = try #require(Int(try String(contentsOfFile: directory + "/postgres/port", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)))
            let url = environment.databaseURL(database: "postgres", port: port)
            let store = try await Store(cluster: configuration(environment, database: url), configuration: StoreLocation.configuration)
            defer { try? store.close() }
            let blob = try await store.put(Data("shared".utf8))
            let outcomes = try await withThrowingTaskGroup(of: (acked: [String], failed: [String]).self) { group in
                for writer in 0 ..< 3 {
                    group.addTask {
                        try await onThread {
                            var acked: [String] = [], failed: [String] = []
                            let deadline = ContinuousClock.now + .seconds(8)
                            var index = 0
                            while ContinuousClock.now < deadline {
                                let key = "w\(writer)/\(index)"
                                index += 1
                                do {
                                    try store.write { try $0.setRecord(Record(value: Data(key.utf8), references: [blob]), forKey: key) }
                                    acked.append(key)
                                } catch let error as StoreError where error.code == .unavailable {
                                    failed.append(key)
                                    Thread.sleep(forTimeInterval: 0.1)
                                }
                            }
                            return (acked, failed)
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(2))
                    try await environment.services("restart-postgres", directory)
                    return ([], [])
                }
                var all: (acked: [String], failed: [String]) = ([], [])
                for try await outcome in group {
                    all.acked += outcome.acked
                    all.failed += outcome.failed
                }
                return all
            }
            #expect(outcomes.acked.count > 0)
            let present = try await eventually(within: .seconds(60)) { try Set(store.keys(withPrefix: "w")) }
            #expect(Set(outcomes.acked).isSubset(of: present), "every acknowledged commit survives")
            #expect(present.isSubset(of: Set(outcomes.acked).union(outcomes.failed)))
            #expect(store.refCount(of: blob) == present.count)
            #expect(try await store.verify().isClean)
        }
    }
}
