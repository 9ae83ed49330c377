import ContentStore
import Foundation
import Hummingbird
import NIOCore

/// The HTTP API of Docs/sync.md, mapped onto the server engine. Every Store call runs on the
/// Store's async twins (its own I/O threads); every failure is a status with a JSON `{"error": ...}` body naming the cause.
struct Routes: Sendable {
    let engine: ServerEngine

    /// The most changes one pull returns.
    static let maximumPullLimit = 10_000
    static let defaultPullLimit = 1000
    /// The bytes of blobs one `/v1/blobs/fetch` answer carries at most (beyond its first blob).
    static let fetchBudget = 8 << 20

    func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: BearerTokens(tokens: engine.configuration.tokens))
        router.post("/v1/blobs/missing") { request, context in try await self.missing(request, context) }
        router.post("/v1/blobs") { request, context in try await self.uploadBatch(request, context) }
        router.post("/v1/blobs/fetch") { request, context in try await self.downloadBatch(request, context) }
        router.put("/v1/blobs/:digest") { request, context in try await self.upload(request, context) }
        router.get("/v1/blobs/:digest") { request, context in try await self.download(request, context) }
        router.post("/v1/push") { request, context in try await self.push(request, context) }
        router.get("/v1/pull") { request, context in try await self.pull(request, context) }
        router.get("/v1/object") { request, context in try await self.object(request, context) }
        router.get("/v1/events") { request, context in try await self.events(request, context) }
        return router
    }

    private func missing(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let list = try await decode(DigestList.self, request)
            let digests = try list.digests.map { try digest($0) }
            let engine = engine
            let missing = engine.missing(digests)
            return try json(DigestList(digests: missing.map(\.hex)))
        }
    }

    private func upload(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let claimed = try digest(context.parameters.get("digest") ?? "")
            let limit = engine.configuration.maximumBlobSize
            if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
                throw HTTPFailure(status: 413, "blob \(claimed) is \(length) bytes; the limit is \(limit)")
            }
            let data = try await body(request, limit: limit, what: "blob \(claimed)")
            let engine = engine
            let isNew = try await engine.receive(data, claimed: claimed)
            return Response(status: isNew ? .created : .ok)
        }
    }

    /// Several blobs in one request (frames, see ``BlobFrames``), each checked like a single upload.
    private func uploadBatch(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let data = try await body(request, limit: engine.configuration.maximumRequestSize, what: "the blob batch")
            let frames: [BlobFrames.Frame]
            do {
                frames = try BlobFrames.parse(data)
            } catch {
                throw HTTPFailure(status: 400, "\(error); nothing stored")
            }
            let engine = engine
            return try json(BlobResults(results: try await engine.receive(batch: frames)))
        }
    }

    /// The blobs a JSON digest list names, as frames, up to ``fetchBudget`` bytes (at least one).
    private func downloadBatch(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let list = try await decode(DigestList.self, request)
            let wanted = try list.digests.map { try digest($0) }
            let engine = engine
            let frames = try await engine.blobs(wanted, budget: Self.fetchBudget)
            var headers = HTTPFields()
            headers[.contentType] = "application/octet-stream"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: frames)))
        }
    }

    private func download(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let wanted = try digest(context.parameters.get("digest") ?? "")
            let engine = engine
            guard let data = try await engine.blob(wanted) else {
                throw HTTPFailure(status: 404, "no blob \(wanted)")
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/octet-stream"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
    }

    private func push(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let push = try await decode(PushRequest.self, request)
            let engine = engine
            do {
                return try json(try await engine.push(push))
            } catch let missing as MissingBlobs {
                return try json(missing, status: .conflict)
            }
        }
    }

    private func pull(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let query = request.uri.queryParameters
            var since: UInt64 = 0
            if let text = query["since"] {
                guard let value = UInt64(text) else { throw HTTPFailure(status: 400, "since=\(text) is not a sequence number") }
                since = value
            }
            let limit = min(Self.maximumPullLimit, max(1, query["limit"].flatMap { Int($0) } ?? Self.defaultPullLimit))
            let client = query["client"].map(String.init)
            let container = query["container"].map(String.init)
            let engine = engine, from = since
            do {
                return try json(try await engine.pull(client: client, since: from, container: container, limit: limit))
            } catch let error as SyncError where error.code == .invalidArgument {
                throw HTTPFailure(status: 400, error.message)
            }
        }
    }

    private func object(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await handling {
            let query = request.uri.queryParameters
            guard let container = query["container"].map(String.init), let id = query["id"].map(String.init) else {
                throw HTTPFailure(status: 400, "/v1/object needs container= and id=")
            }
            try Names.check(container: container, id: id)
            let engine = engine
            guard let object = try await engine.object(container: container, id: id) else {
                throw HTTPFailure(status: 404, "no object \(container)/\(id)")
            }
            return try json(WireObject(object))
        }
    }

    /// Server-sent events: `event: sequence` with the current sequence at once, then each new one.
    private func events(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let updates = engine.announcements.subscribe()
        let engine = engine
        let current = try await engine.sequence
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await writer.write(Self.event(current))
            for await sequence in updates {
                try await writer.write(Self.event(sequence))
            }
            try await writer.finish(nil)
        })
    }

    private static func event(_ sequence: UInt64) -> ByteBuffer {
        ByteBuffer(string: "event: sequence\ndata: \(sequence)\n\n")
    }

    // MARK: Helpers

    /// Runs a handler, turning failures into statuses with a JSON body.
    private func handling(_ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let failure as HTTPFailure {
            return try json(WireError(error: failure.message), status: .init(code: failure.status))
        } catch let error as SyncError {
            return try json(WireError(error: error.description), status: .badRequest)
        } catch let error as StoreError where error.code == .invalidArgument || error.code == .limitExceeded {
            return try json(WireError(error: error.description), status: .badRequest)
        } catch let error as StoreError {
            engine.configuration.logger.error("sync request failed", metadata: ["error": "\(error)"])
            return try json(WireError(error: error.description), status: .internalServerError)
        }
    }

    private func body(_ request: Request, limit: Int, what: String) async throws -> Data {
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw HTTPFailure(status: 413, "\(what) is larger than the limit of \(limit) bytes")
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ request: Request) async throws -> T {
        let data = try await body(request, limit: engine.configuration.maximumRequestSize, what: "the request")
        do {
            return try Wire.decode(type, from: data)
        } catch {
            throw HTTPFailure(status: 400, "the request is not a valid \(type): \(error)")
        }
    }

    private func digest(_ hex: String) throws -> Digest {
        guard let digest = Digest(hex: hex) else { throw HTTPFailure(status: 400, "\"\(hex.prefix(80))\" is not a SHA-256 digest (64 hex digits)") }
        return digest
    }

    private func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try Wire.encode(value))))
    }
}

/// Refuses requests without one of the configured bearer tokens (401); none configured: open.
struct BearerTokens: RouterMiddleware {
    typealias Context = BasicRequestContext
    let tokens: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !tokens.isEmpty else { return try await next(request, context) }
        let header = request.headers[.authorization] ?? ""
        guard header.hasPrefix("Bearer "), tokens.contains(String(header.dropFirst("Bearer ".count))) else {
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = "Bearer"
            headers[.contentType] = "application/json"
            let body = (try? Wire.encode(WireError(error: "a valid bearer token is required"))) ?? Data()
            return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
        return try await next(request, context)
    }
}
