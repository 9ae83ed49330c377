import ContentStore
import ContentStoreCluster
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// A cluster store under faults of its services: refused credentials, the object store stopped
/// and started, PostgreSQL restarted with `-m immediate` during commits, a snapshot whose lease
/// lapsed while PostgreSQL was down. Tests that stop a service run a private instance of it, so
/// other tests keep theirs. Deadlines are generous (a loaded machine), and nothing measures speed:
/// what is asserted is that every call ends, with the right outcome.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterFaultTests {
    /// A short request timeout: these tests wait out deadlines while a service is down.
    func configuration(_ environment: ClusterTestEnvironment, database: String, endpoint: URL? = nil) -> ClusterConfiguration {
        environment.configuration(database: database, endpoint: endpoint, requestTimeout: .seconds(20))
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

    /// Puts of packed blobs fail with `unavailable` naming the endpoint while the object store is
    /// down (what lives in PostgreSQL keeps working), then succeed on the same open store.
    @Test(.timeLimit(.minutes(8)))
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
            for _ in 0 ..< 2 {
                let error = await #expect(throws: StoreError.self) { try await store.put(EngineContractTests.randomData(100_000)) }
                #expect(error?.code == .unavailable)
                #expect("\(error!)".contains(endpoint.absoluteString), "the error names the endpoint")
                #expect(!"\(error!)".contains(environment.secretAccessKey))
            }
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

    /// Writers run read-modify-write commits while PostgreSQL is restarted with `-m immediate`:
    /// every acknowledged commit survives, a commit whose answer was lost is resolved exactly once
    /// (each writer's counter equals the number of its acknowledged commits: none applied twice,
    /// none applied without the writer hearing so), counts stay exact, and the same open store works
    /// afterwards.
    @Test(.timeLimit(.minutes(8)))
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
            let writers = 3
            let outcomes = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0 ..< writers {
                    group.addTask {
                        try await onThread {
                            var acked: [String] = []
                            let deadline = ContinuousClock.now + .seconds(10)
                            while ContinuousClock.now < deadline {
                                do {
                                    let key = try store.write { transaction -> String in
                                        let counter = "c/\(writer)"
                                        let count = try transaction.record(forKey: counter).map { Int(String(decoding: $0.value, as: UTF8.self))! } ?? 0
                                        let key = "w\(writer)/\(count)"
                                        try transaction.setRecord(Record(value: Data(key.utf8), references: [blob]), forKey: key)
                                        try transaction.setRecord(Record(value: Data(String(count + 1).utf8)), forKey: counter)
                                        return key
                                    }
                                    acked.append(key)
                                } catch let error as StoreError where error.code == .unavailable {
                                    #expect(!"\(error)".contains("contentstore-test-password"))
                                    Thread.sleep(forTimeInterval: 0.1)
                                }
                            }
                            return acked
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(2))
                    try await environment.services("restart-postgres", directory)
                    return []
                }
                var acked: [String] = []
                for try await keys in group { acked += keys }
                return acked
            }
            #expect(outcomes.count > 0)
            #expect(Set(outcomes).count == outcomes.count, "no key acknowledged twice")
            // The same open store works again, without reopening.
            try await eventually(within: .seconds(120)) { try await store.write { try $0.setRecord(Record(value: Data("after".utf8)), forKey: "after") } }
            let present = Set(try await store.keys(withPrefix: "w"))
            #expect(present == Set(outcomes), "every acknowledged commit survives, and only those")
            for writer in 0 ..< writers {
                let counter = try await store.record(forKey: "c/\(writer)").map { Int(String(decoding: $0.value, as: UTF8.self))! } ?? 0
                #expect(counter == outcomes.filter { $0.hasPrefix("w\(writer)/") }.count, "writer \(writer)'s commits applied exactly once")
            }
            #expect(store.refCount(of: blob) == present.count)
            #expect(try await store.verify().isClean)
        }
    }

    /// A snapshot whose lease could not be renewed for longer than its life (PostgreSQL down)
    /// fails its blob reads with `unavailable`, even once PostgreSQL is back, while a snapshot
    /// whose lease was renewed outlives several lease lives and a new snapshot works.
    @Test(.timeLimit(.minutes(8)))
    func snapshotWhoseLeaseLapsedFailsItsBlobReads() async throws {
        let environment = try ClusterTestEnvironment.required()
        try await withScratchDirectory(stopping: "stop-postgres", environment) { directory in
            try await environment.services("start-postgres", directory)
            let port = try #require(Int(try String(contentsOfFile: directory + "/postgres/port", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)))
            var cluster = configuration(environment, database: environment.databaseURL(database: "postgres", port: port))
            cluster.leaseDuration = .seconds(10)
            let store = try await Store(cluster: cluster, configuration: StoreLocation.configuration)
            defer { try? store.close() }
            let data = Data("pinned by a snapshot".utf8)
            let digest = try await store.put(data)
            try await store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
            let snapshot = try store.makeSnapshot()
            try await Task.sleep(for: .seconds(25))
            #expect(try snapshot.get(digest) == data, "a renewed lease outlives its first life")

            try await environment.services("stop-postgres", directory)
            try await Task.sleep(for: .seconds(12))
            try await environment.services("start-postgres", directory)
            _ = try await eventually(within: .seconds(120)) { try await store.record(forKey: "k") }
            let error = #expect(throws: StoreError.self) { try snapshot.get(digest) }
            #expect(error?.code == .unavailable)
            #expect("\(error!)".contains("lapsed"))
            let fresh = try await eventually(within: .seconds(60)) { try store.makeSnapshot() }
            #expect(try fresh.get(digest) == data)
            #expect(try await store.get(digest) == data)
        }
    }
}
