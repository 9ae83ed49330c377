import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One HTTP exchange with the sync server.
struct TransportRequest: Sendable {
    var method: String
    /// The path and query after the server URL, e.g. `/v1/pull?since=3`.
    var path: String
    var body: Data?
    var contentType: String?
}

struct TransportResponse: Sendable {
    var status: Int
    var body: Data
}

/// The client's narrow view of the network, so tests can lose a response or stop a server between a
/// request and its answer; ``HTTPTransport`` is the real one.
protocol SyncTransport: Sendable {
    /// Sends a request and returns the whole response; throws when no response arrived.
    func send(_ request: TransportRequest) async throws -> TransportResponse
    /// Opens the server-sent event stream at `path` and yields each `data:` field.
    func events(_ path: String) async throws -> AsyncThrowingStream<String, any Error>
}

/// The network failed before an HTTP status arrived (refused, reset, timed out): transient.
struct TransportFailure: Error, Sendable, CustomStringConvertible {
    var endpoint: String
    /// What the HTTP client said.
    var cause: String
    var description: String { "\(endpoint): \(cause)" }
}

/// The HTTP client of every SyncClient in the process. Unlike `HTTPClient.shared` it does not
/// retry a refused connection until the request's deadline: the sync run retries with its own
/// backoff and must learn at once that the server is unreachable, to report `offline`.
private let sharedHTTPClient: HTTPClient = {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.retryConnectionEstablishment = false
    configuration.timeout = .init(connect: .seconds(10))
    return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}()

/// async-http-client against the server URL, with the bearer token on every request.
struct HTTPTransport: SyncTransport {
    let server: URL
    let token: String?
    let timeout: Duration
    /// The largest response accepted: a blob of the largest size a server may be configured for.
    static let maximumResponseSize = 1 << 32

    private func prepare(_ method: String, _ path: String) -> HTTPClientRequest {
        var base = server.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var request = HTTPClientRequest(url: base + path)
        request.method = HTTPMethod(rawValue: method)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        var prepared = prepare(request.method, request.path)
        if let body = request.body {
            prepared.body = .bytes(ByteBuffer(bytes: body))
            prepared.headers.add(name: "Content-Type", value: request.contentType ?? "application/octet-stream")
        }
        do {
            let response = try await sharedHTTPClient.execute(prepared, timeout: .nanoseconds(Int64(timeout.inNanoseconds)))
            let body = try await response.body.collect(upTo: Self.maximumResponseSize)
            return TransportResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
        } catch {
            throw TransportFailure(endpoint: "\(request.method) \(server.absoluteString)\(request.path.prefix { $0 != "?" })", cause: "\(error)")
        }
    }

    func events(_ path: String) async throws -> AsyncThrowingStream<String, any Error> {
        let request = prepare("GET", path)
        let response: HTTPClientResponse
        do {
            response = try await sharedHTTPClient.execute(request, deadline: .distantFuture)
        } catch {
            throw TransportFailure(endpoint: "GET \(server.absoluteString)\(path)", cause: "\(error)")
        }
        guard response.status == .ok else {
            throw TransportFailure(endpoint: "GET \(server.absoluteString)\(path)", cause: "status \(response.status.code)")
        }
        return AsyncThrowingStream { continuation in
            let reader = Task {
                do {
                    var pending = ""
                    for try await buffer in response.body {
                        pending += String(buffer: buffer)
                        while let newline = pending.firstIndex(of: "\n") {
                            let line = pending[..<newline]
                            pending = String(pending[pending.index(after: newline)...])
                            if line.hasPrefix("data:") { continuation.yield(line.dropFirst(5).trimmingCharacters(in: .whitespaces)) }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in reader.cancel() }
        }
    }
}

extension Duration {
    var inNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
