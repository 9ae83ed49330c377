import AsyncHTTPClient
import ContentStore
import Foundation
import Testing
@testable import Sync

@Suite("Sync: bearer tokens")
struct SyncSecurityTests {
    @Test func requestsWithoutAValidTokenAreRefused() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server")) { $0.tokens = ["s3cret", "other"] }
        defer { Task { await server.stop() } }
        for path in ["/v1/pull", "/v1/events", "/v1/blobs/\(Digest.sha256(Data()).hex)"] {
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: server.url.absoluteString + path), timeout: .seconds(300))  // SyncFixture.requestTimeout
            #expect(response.status.code == 401, "\(path)")
            #expect(response.headers["WWW-Authenticate"].first == "Bearer")
        }

        for token in [nil, "wrong"] as [String?] {
            let client = try fixture.client(try fixture.store("c-\(token ?? "none")"), server.url, "c") { $0.token = token }
            try await client.persist(.note("x", "kept"))
            let error = await #expect(throws: SyncError.self) { try await client.sync() }
            #expect(error?.code == .unauthorized)
            #expect(error.map { !$0.description.contains("s3cret") } == true)
            #expect(try client.pendingCount == 1)
        }
        let client = try fixture.client(try fixture.store("good"), server.url, "good") { $0.token = "s3cret" }
        try await client.persist(.note("x", "pushed"))
        #expect(try await client.sync().pushed == 1)
    }

    @Test func badNamesAreInvalidArguments() async throws {
        let fixture = SyncFixture()
        let store = try fixture.store("a")
        #expect(throws: SyncError.self) { try fixture.client(store, offlineURL, "") }
        #expect(throws: SyncError.self) { try fixture.client(store, offlineURL, "a/b") }
        let client = try fixture.client(store, offlineURL, "a")
        for object in [SyncObject.note("", "x"), .note("x", "x", container: ""), .note("a\0b", "x"),
                       .note("x", "x", attachments: ["": Data()]), .note(String(repeating: "x", count: 2000), "x")] {
            let error = await #expect(throws: SyncError.self) { try await client.persist(object) }
            #expect(error?.code == .invalidArgument)
        }
        #expect(try client.pendingCount == 0)
        // Names with slashes, colons and non-ASCII are just names.
        try await client.persist(.note("../x:1/é", "fine", container: "5:a/b"))
        #expect(try client.object(container: "5:a/b", id: "../x:1/é")?.text == "fine")
        #expect(try client.objects(in: "5:a").isEmpty)
    }
}
