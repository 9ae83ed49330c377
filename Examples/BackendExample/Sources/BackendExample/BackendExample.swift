// A blob and record service on ContentStore's async API:
//
//   PUT /blobs                 body = the blob's bytes        → 200, the digest (hex)
//   GET /blobs/:digest                                        → 200 the bytes | 404 | 400
//   PUT /records/:key?references=<hex>,<hex>  body = value    → 204 (durable when it answers)
//
// Every store call is `await`ed: blocking work (I/O, fsync, group commit) runs on the store's own
// threads, never on the event loops or the cooperative pool that serve requests.
// Usage: BackendExample [--store PATH] [--port N]   (defaults ./backend-store, 8080)
import ContentStore
import Foundation
import Hummingbird

@main
struct BackendExample {
    static func main() async throws {
        let arguments = CommandLine.arguments
        func value(_ flag: String) -> String? { arguments.firstIndex(of: flag).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil } }
        let store = try Store(at: URL(fileURLWithPath: value("--store") ?? "./backend-store"))
        let port = value("--port").flatMap(Int.init) ?? 8080

        let router = Router()
        router.put("blobs") { request, _ -> String in
            let body = try await request.body.collect(upTo: 256 << 20)
            let digest = try await store.put(Data(body.readableBytesView))
            return digest.hex
        }
        router.get("blobs/:digest") { _, context -> Response in
            guard let hex = context.parameters.get("digest"), let digest = Digest(hex: hex) else {
                throw HTTPError(.badRequest, message: "expected 64 hex digits")
            }
            do {
                let bytes = try await store.get(digest)
                return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
            } catch let error as StoreError where error.code == .notFound {
                throw HTTPError(.notFound)
            }
        }
        router.put("records/:key") { request, context -> HTTPResponse.Status in
            guard let key = context.parameters.get("key") else { throw HTTPError(.badRequest) }
            let references = try (request.uri.queryParameters.get("references") ?? "")
                .split(separator: ",").map { hex in
                    guard let digest = Digest(hex: String(hex)) else { throw HTTPError(.badRequest, message: "bad digest \(hex)") }
                    return digest
                }
            let value = Data(try await request.body.collect(upTo: 4 << 20).readableBytesView)
            do {
                try await store.write { tx in try tx.setRecord(Record(value: value, references: references), forKey: key) }
            } catch let error as StoreError where error.code == .missingBlob || error.code == .invalidArgument || error.code == .limitExceeded {
                throw HTTPError(.badRequest, message: error.message)
            }
            return .noContent
        }

        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await app.runService()
        try await store.close()
    }
}
