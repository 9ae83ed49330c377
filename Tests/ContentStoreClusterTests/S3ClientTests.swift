import ContentStore
import Foundation
import Testing
@testable import ContentStoreCluster

/// The S3 client against the real SeaweedFS gateway `make test` starts (signatures checked).
/// Each test uses a bucket of its own.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct S3ClientTests {
    func withClient(_ body: (S3Client, ClusterTestEnvironment) async throws -> Void) async throws {
        let environment = try ClusterTestEnvironment.required()
        let client = try S3Client(configuration: environment.s3Configuration(bucket: ClusterTestEnvironment.uniqueBucket()))
        do {
            try await client.createBucketIfMissing()
            try await body(client, environment)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test func roundTripHeadAndDelete() async throws {
        try await withClient { client, _ in
            try await client.createBucketIfMissing()  // a second time: already there, still fine
            let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            #expect(try await client.put("packs/ab/one", bytes: bytes, ifAbsent: false) == .created)
            #expect(try await client.get("packs/ab/one", range: nil) == bytes)
            let info = try #require(try await client.head("packs/ab/one"))
            #expect(info.size == 10_000)
            #expect(!info.etag.isEmpty)
            try await client.delete("packs/ab/one")
            #expect(try await client.head("packs/ab/one") == nil)
            try await client.delete("packs/ab/one")  // deleting a missing object succeeds
            await #expect(throws: StoreError(code: .notFound, message: "")) {
                try await client.get("packs/ab/one", range: nil)
            }
        }
    }

    @Test func emptyObjectAndUnusualKeys() async throws {
        try await withClient { client, _ in
            for key in ["empty", "a b/c+d=e&f", "ünïcødé/κλειδί", "x/..y/z"] {
                _ = try await client.put(key, bytes: [], ifAbsent: false)
                #expect(try await client.get(key, range: nil) == [])
                #expect(try await client.head(key)?.size == 0)
            }
        }
    }

    @Test(arguments: [0..<1, 0..<10, 5..<6, 4090..<5000, 9_990..<10_000, 9_990..<20_000])
    func rangedGet(_ range: Range<UInt64>) async throws {
        try await withClient { client, _ in
            let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            _ = try await client.put("ranged", bytes: bytes, ifAbsent: false)
            let end = min(range.upperBound, UInt64(bytes.count))
            #expect(try await client.get("ranged", range: range) == Array(bytes[Int(range.lowerBound)..<Int(end)]))
        }
    }

    @Test func rangeBeyondTheEndIsInvalid() async throws {
        try await withClient { client, _ in
            _ = try await client.put("short", bytes: [1, 2, 3], ifAbsent: false)
            await #expect(throws: StoreError(code: .invalidArgument, message: "")) {
                try await client.get("short", range: 10..<20)
            }
        }
    }

    @Test func listingPagesInByteOrderUnderAPrefix() async throws {
        try await withClient { client, _ in
            let keys = ["p/b", "p/a", "p/c/1", "p/Z", "p/é", "p/a0", "p/~"]
            for key in keys + ["q/outside", "o"] { _ = try await client.put(key, bytes: [9], ifAbsent: false) }
            var pages = 0
            var seen: [String] = []
            var continuation: String?
            repeat {
                let page = try await client.list(prefix: "p/", continuation: continuation, maxKeys: 3)
                #expect(page.objects.count <= 3)
                seen += page.objects.map(\.key)
                continuation = page.continuation
                pages += 1
            } while continuation != nil
            #expect(pages == 3)
            #expect(seen == keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
            #expect(try await client.listAll(prefix: "nothing/").isEmpty)
            #expect(try await client.listAll(prefix: "").count == keys.count + 2)
        }
    }

    @Test func conditionalPutNeverReplaces() async throws {
        try await withClient { client, _ async throws in
            #expect(try await client.supportsConditionalPuts())  // SeaweedFS honours If-None-Match: *
            #expect(try await client.put("once", bytes: [1, 1, 1], ifAbsent: true) == .created)
            #expect(try await client.put("once", bytes: [2, 2], ifAbsent: true) == .alreadyExists)
            #expect(try await client.get("once", range: nil) == [1, 1, 1])
            // The probe leaves nothing behind.
            #expect(try await client.listAll(prefix: S3Client.probePrefix).isEmpty)
            // Without the condition a put replaces.
            #expect(try await client.put("once", bytes: [2, 2], ifAbsent: false) == .created)
            #expect(try await client.get("once", range: nil) == [2, 2])
        }
    }

    @Test func concurrentConditionalPutsCreateOnce() async throws {
        try await withClient { client, _ in
            let outcomes = try await withThrowingTaskGroup(of: PutOutcome.self) { group in
                for writer in 0..<8 {
                    group.addTask { try await client.put("raced", bytes: [UInt8(writer)], ifAbsent: true) }
                }
                return try await group.reduce(into: [PutOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .created }.count == 1)
            #expect(outcomes.filter { $0 == .alreadyExists }.count == 7)
        }
    }

    @Test func wrongSecretIsRefusedClearlyAndWritesNothing() async throws {
        try await withClient { client, environment in
            let wrongSecret = "not-the-secret-\(UUID().uuidString)"
            let impostor = try S3Client(configuration: environment.s3Configuration(bucket: client.bucket, secret: wrongSecret))
            defer { Task { try? await impostor.shutdown() } }
            let error = await #expect(throws: StoreError.self) {
                try await impostor.put("forged", bytes: [6, 6, 6], ifAbsent: false)
            }
            #expect(error?.code == .invalidArgument)
            let text = "\(error!)"
            #expect(text.contains(ObjectStoreEndpoint.display(environment.s3Endpoint)))
            #expect(text.contains(environment.accessKeyID))
            #expect(!text.contains(wrongSecret))
            #expect(!text.contains(environment.secretAccessKey))
            #expect(try await client.head("forged") == nil)
        }
    }

    @Test func missingBucketIsNotFound() async throws {
        let environment = try ClusterTestEnvironment.required()
        let client = try S3Client(configuration: environment.s3Configuration(bucket: ClusterTestEnvironment.uniqueBucket()))
        defer { Task { try? await client.shutdown() } }
        let error = await #expect(throws: StoreError.self) { try await client.get("anything", range: nil) }
        #expect(error?.code == .notFound)
    }

    @Test func invalidBucketAndEndpointAreRefusedUpFront() throws {
        let environment = try ClusterTestEnvironment.required()
        #expect(throws: StoreError(code: .invalidArgument, message: "")) {
            _ = try S3Client(configuration: environment.s3Configuration(bucket: "Not_A_Bucket"))
        }
        #expect(throws: StoreError(code: .invalidArgument, message: "")) {
            _ = try S3Client(configuration: environment.s3Configuration(bucket: "fine-bucket", endpoint: URL(string: "ftp://127.0.0.1:1")!))
        }
    }

    /// The gateway stopped: calls fail with `unavailable` naming the endpoint and never the secret;
    /// started again: the same client works. A private instance, so other tests keep theirs.
    @Test(.timeLimit(.minutes(8)))
    func unavailableWhileStoppedThenRecoversWithoutANewClient() async throws {
        let environment = try ClusterTestEnvironment.required()
        try await withScratchDirectory(stopping: "stop-s3", environment) { directory in
            try await environment.services("start-s3", directory)
            let ports = try String(contentsOfFile: directory + "/s3/ports", encoding: .utf8).split(separator: " ")
            let endpoint = URL(string: "http://127.0.0.1:\(ports[6].trimmingCharacters(in: .whitespacesAndNewlines))")!
            var configuration = environment.s3Configuration(bucket: ClusterTestEnvironment.uniqueBucket(), endpoint: endpoint)
            configuration.retryDelays = [.milliseconds(50)]
            let client = try S3Client(configuration: configuration)
            defer { Task { try? await client.shutdown() } }
            try await client.createBucketIfMissing()
            _ = try await client.put("before", bytes: [1], ifAbsent: false)

            try await environment.services("stop-s3", directory)
            let error = await #expect(throws: StoreError.self) { try await client.put("during", bytes: [2], ifAbsent: false) }
            #expect(error?.code == .unavailable)
            let text = "\(error!)"
            #expect(text.contains(endpoint.absoluteString))
            #expect(!text.contains(environment.secretAccessKey))
            await #expect(throws: StoreError(code: .unavailable, message: "")) { try await client.get("before", range: nil) }

            try await environment.services("start-s3", directory)
            try await eventually(within: .seconds(180)) { _ = try await client.put("after", bytes: [3], ifAbsent: false) }
            #expect(try await client.get("before", range: nil) == [1])
            #expect(try await client.get("after", range: nil) == [3])
        }
    }
}
