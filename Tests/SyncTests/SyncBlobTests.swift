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

    @Test func aBatchRefusesForgedAndOversizeBlobsAloneAndStoresTheRest() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let server = try await fixture.startServer(serverStore) { $0.maximumBlobSize = 1000 }
        defer { Task { await server.stop() } }
        let good = Data("good bytes".utf8), other = Data("other bytes".utf8), large = Data(repeating: 9, count: 5000)
        let forgedAs = Digest.sha256(Data("the real bytes".utf8))
        var frames = Data()
        BlobFrames.append(Digest.sha256(good), good, to: &frames)
        BlobFrames.append(forgedAs, other, to: &frames)
        BlobFrames.append(Digest.sha256(large), large, to: &frames)
        BlobFrames.append(Digest.sha256(good), good, to: &frames)
        let (status, body) = try await post(frames, to: server.url.appendingPathComponent("v1/blobs"))
        #expect(status == 200)
        let answer = try Wire.decode(BlobResults.self, from: body)
        #expect(answer.results.map(\.status) == [201, 400, 413, 200])
        #expect(answer.results[1].error?.contains(forgedAs.hex) == true)
        #expect(serverStore.contains(Digest.sha256(good)))
        for refused in [forgedAs, Digest.sha256(other), Digest.sha256(large)] { #expect(!serverStore.contains(refused)) }

        // Broken framing: 400 and nothing stored, not even the well-formed frame before it.
        let fresh = Data("fresh".utf8)
        var broken = Data()
        BlobFrames.append(Digest.sha256(fresh), fresh, to: &broken)
        broken.append(contentsOf: Digest.sha256(Data("x".utf8)).hex.utf8)
        broken.append(contentsOf: [200, 0, 0, 0, 0, 0, 0, 0, 1, 2])
        #expect(try await post(broken, to: server.url.appendingPathComponent("v1/blobs")).status == 400)
        #expect(!serverStore.contains(Digest.sha256(fresh)))
    }

    @Test func smallBlobsTravelInBatchesBothWays() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let sent = CountingTransport(server.url)
        let a = try fixture.client(try fixture.store("a"), transport: sent, "a")
        for index in 0 ..< 300 {
            try await a.persist(.note("\(index)", String(repeating: "body \(index) ", count: 100),
                                      attachments: index % 30 == 0 ? ["big": Data(repeating: UInt8(index / 30), count: 2 << 20)] : [:]))
        }
        #expect(try await a.sync().pushed == 300)
        #expect(server.server.blobsReceived == 310)
        // Two push batches of changes, each cut in at most two groups of blobs: a few batch uploads,
        // and the ten 2 MiB attachments alone.
        #expect(sent.count("POST /v1/blobs") <= 4)
        #expect(sent.count("PUT /v1/blobs/") == 10)

        let received = CountingTransport(server.url)
        let b = try fixture.client(try fixture.store("b"), transport: received, "b")
        #expect(try await b.sync().pulled == 300)
        #expect(try b.objects(in: "notes") == a.objects(in: "notes"))
        // 310 blobs in two groups; an answer carries up to 8 MiB, so the attachments take a few.
        #expect(received.count("POST /v1/blobs/fetch") <= 6)
        #expect(received.count("GET /v1/blobs/") == 0)
    }

    private func post(_ body: Data, to url: URL) async throws -> (status: Int, body: Data) {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let answer = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), Data(answer.readableBytesView))
    }

    private func put(_ data: Data, as digest: Digest, to url: URL) async throws -> Int {
        var request = HTTPClientRequest(url: url.absoluteString + "/v1/blobs/\(digest.hex)")
        request.method = .PUT
        request.body = .bytes(ByteBuffer(bytes: data))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}
