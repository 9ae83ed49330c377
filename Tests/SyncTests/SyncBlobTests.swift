import AsyncHTTPClient
import ContentStore
import Foundation
import NIOCore
import Testing
@testable import Sync

@Suite("Sync: blobs move once, checked and limited")
struct SyncBlobTests {
    @Test func anAttachmentSharedByAHundredObjectsIsSentOnce() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        let attachment = Data((0 ..< 256 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        for index in 0 ..< 100 {
            try await a.persist(.note("\(index)", "object \(index)", attachments: ["photo.jpg": attachment]))
        }
        let pushed = try await a.sync()
        #expect(pushed.pushed == 100)
        #expect(server.server.blobsReceived == 101)   // 100 bodies, 1 attachment
        #expect(pushed.bytesSent < Int64(2 * attachment.count))

        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        let pulled = try await b.sync()
        #expect(pulled.pulled == 100)
        #expect(pulled.bytesReceived < Int64(2 * attachment.count))
        #expect(try b.objects(in: "notes").allSatisfy { $0.attachments["photo.jpg"] == attachment })

        // A new object reusing the attachment sends no attachment bytes at all.
        try await b.persist(.note("new", "reuses it", attachments: ["copy": attachment]))
        let again = try await b.sync()
        #expect(again.pushed == 1)
        #expect(again.bytesSent < 4096)
    }

    @Test func aRejectedPushIsKeptAndReported() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let server = try await fixture.startServer(serverStore) { $0.maximumBlobSize = 1024 }
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        let events = a.events
        let big = Data(repeating: 1, count: 4096)
        try await a.persist(.note("big", "too large", attachments: ["file": big]))
        try await a.persist(.note("small", "fine"))
        let report = try await a.sync()
        #expect(report.pushed == 1)
        #expect(report.conflicts == 1)
        #expect(try a.pendingCount == 0)
        let conflict = try #require(try a.conflicts().first)
        #expect(conflict.local.attachments["file"] == big)
        #expect(conflict.server == nil)
        guard case .rejected(let status, let message) = conflict.reason else { Issue.record("not a rejection"); return }
        #expect(status == 413)
        #expect(message.contains("1024"))
        #expect(try a.object(container: "notes", id: "big") == nil)   // the server holds nothing
        #expect(!serverStore.contains(Digest.sha256(big)))
        var reported = false
        for await event in events {
            if case .conflict(let kept) = event { reported = kept == conflict; break }
        }
        #expect(reported)
        // Not retried: the next sync pushes nothing.
        #expect(try await a.sync().pushed == 0)
        try await a.resolve(conflict, keepingLocal: false)
        #expect(try a.conflicts().isEmpty)
    }

    @Test func aForgedDigestOrAnOversizeUploadIsRefusedWithNothingStored() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let server = try await fixture.startServer(serverStore) { $0.maximumBlobSize = 1000 }
        defer { Task { await server.stop() } }
        let claimed = Digest.sha256(Data("the real bytes".utf8))
        let forged = try await put(Data("other bytes".utf8), as: claimed, to: server.url)
        #expect(forged == 400)
        #expect(!serverStore.contains(claimed))
        #expect(!serverStore.contains(Digest.sha256(Data("other bytes".utf8))))

        let large = Data(repeating: 9, count: 5000)
        #expect(try await put(large, as: Digest.sha256(large), to: server.url) == 413)
        #expect(!serverStore.contains(Digest.sha256(large)))
        #expect(try await put(Data("x".utf8), as: Digest.sha256(Data("x".utf8)), to: server.url) == 201)
        #expect(serverStore.contains(Digest.sha256(Data("x".utf8))))
    }

    private func put(_ data: Data, as digest: Digest, to url: URL) async throws -> Int {
        var request = HTTPClientRequest(url: url.absoluteString + "/v1/blobs/\(digest.hex)")
        request.method = .PUT
        request.body = .bytes(ByteBuffer(bytes: data))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}
