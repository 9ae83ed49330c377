import AsyncHTTPClient
import ContentStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// An ``ObjectStore`` over the S3 REST API: path-style requests (`/bucket/key`), every one signed
/// with ``SigV4Signer``, on async-http-client's own event loops (never the caller's).
///
/// Owns two invariants:
/// - No credential leaves this type except inside a signature: errors name the endpoint, bucket,
///   key and the access key ID, never the secret; the endpoint is shown without user information.
/// - A put with `ifAbsent` never replaces an object. Where the service honours
///   `If-None-Match: *` (probed once, before the first such put) the check is atomic; elsewhere it is
///   a HEAD before the PUT, which is enough for the cluster's objects: their names are derived from
///   their contents, so two writers of one key write the same bytes.
///
/// Transport failures, 5xx and 429 are retried (``Configuration/retryDelays``); when they persist
/// the call throws `unavailable`. An attempt that outlives ``Configuration/requestTimeout`` is
/// abandoned and not retried, so a call ends within one request timeout plus the retries of
/// failures that came quicker, whatever the service does. The client keeps no state a failure could spoil, so once the service is
/// back the same client works again.
package final class S3Client: ObjectStore {
    package struct Configuration: Sendable {
        package var endpoint: URL
        package var bucket: String
        package var region: String
        package var accessKeyID: String
        package var secretAccessKey: String
        package var requestTimeout: Duration
        /// Waits before each retry of a request that failed in transport or with 5xx/429.
        package var retryDelays: [Duration]
        /// The largest response body accepted.
        package var maximumResponseBytes: Int

        package init(endpoint: URL, bucket: String, region: String, accessKeyID: String, secretAccessKey: String,
                     requestTimeout: Duration = .seconds(30), retryDelays: [Duration] = [.milliseconds(100), .milliseconds(400)],
                     maximumResponseBytes: Int = 1 << 30) {
            self.endpoint = endpoint
            self.bucket = bucket
            self.region = region
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.requestTimeout = requestTimeout
            self.retryDelays = retryDelays
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    private let configuration: Configuration
    private let signer: SigV4Signer
    private let http: HTTPClient
    private let host: String
    private let endpointDescription: String
    private let logger: Logger
    /// Nil until the first conditional put tells whether `If-None-Match: *` is honoured.
    private let conditionalPuts = Mutex<Bool?>(nil)
    private let isShutDown = Mutex(false)

    package init(configuration: Configuration, logger: Logger = Logger(label: "ContentStoreCluster.S3")) throws {
        guard let scheme = configuration.endpoint.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let hostName = configuration.endpoint.host, !hostName.isEmpty else {
            throw StoreError(code: .invalidArgument,
                             message: "object store endpoint \(ObjectStoreEndpoint.display(configuration.endpoint)) is not an http(s)://host[:port] URL")
        }
        guard Self.isValidBucketName(configuration.bucket) else {
            throw StoreError(code: .invalidArgument,
                             message: "bucket name \"\(configuration.bucket)\" is not a valid S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
        }
        self.configuration = configuration
        self.signer = SigV4Signer(accessKeyID: configuration.accessKeyID, secretAccessKey: configuration.secretAccessKey,
                                  region: configuration.region, service: "s3", normalizesPath: false)
        self.host = configuration.endpoint.port.map { "\(hostName):\($0)" } ?? hostName
        self.endpointDescription = ObjectStoreEndpoint.display(configuration.endpoint)
        self.logger = logger
        var httpConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(Int64(configuration.requestTimeout.components.seconds)))
        )
        httpConfiguration.httpVersion = .http1Only
        self.http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration,
                               backgroundActivityLogger: logger)
    }

    /// The bucket every request addresses.
    package var bucket: String { configuration.bucket }

    deinit {
        // Not syncShutdown: a deinit may run on an event loop, where blocking is forbidden.
        if !isShutDown.withLock({ $0 }) { http.shutdown { _ in } }
    }

    package func shutdown() async throws {
        let first = isShutDown.withLock { done in defer { done = true }; return !done }
        if first { try await http.shutdown() }
    }

    // MARK: - Operations

    package func createBucketIfMissing() async throws {
        let response = try await send(.PUT, key: nil, operation: "create bucket")
        switch response.status.code {
        case 200..<300: return
        // Ours already (AWS says 409 BucketAlreadyOwnedByYou; others vary in the code).
        case 409 where ["BucketAlreadyOwnedByYou", "BucketAlreadyExists"].contains(response.s3Code): return
        default: throw failure(response, operation: "create bucket", key: nil)
        }
    }

    package func put(_ key: String, bytes: [UInt8], ifAbsent: Bool) async throws -> PutOutcome {
        if ifAbsent, try await !supportsConditionalPuts() {
            if try await head(key) != nil { return .alreadyExists }
            return try await plainPut(key, bytes: bytes)
        }
        let headers: [(name: String, value: String)] = ifAbsent ? [("If-None-Match", "*")] : []
        for attempt in 0...configuration.retryDelays.count {
            if attempt > 0 { try await Task.sleep(for: configuration.retryDelays[attempt - 1]) }
            let response = try await send(.PUT, key: key, headers: headers, body: bytes, operation: "put")
            switch response.status.code {
            case 200..<300:
                return .created
            case 412 where ifAbsent:
                return .alreadyExists
            // 409 ConditionalRequestConflict: a concurrent conditional put of the same key is in
            // flight; its outcome decides ours, so ask again after a wait (as for 5xx).
            case 409 where ifAbsent && response.s3Code == "ConditionalRequestConflict":
                continue
            default:
                throw failure(response, operation: "put", key: key)
            }
        }
        throw StoreError(code: .unavailable,
                         message: "object store at \(endpointDescription) kept answering 409 ConditionalRequestConflict to a conditional put of "
                         + "\(configuration.bucket)/\(key) (\(configuration.retryDelays.count + 1) attempts)")
    }

    package func get(_ key: String, range: Range<UInt64>?) async throws -> [UInt8] {
        if let range, range.isEmpty { return [] }
        let headers: [(name: String, value: String)] = range.map { [("Range", "bytes=\($0.lowerBound)-\($0.upperBound - 1)")] } ?? []
        let response = try await send(.GET, key: key, headers: headers, operation: "get")
        guard (200..<300).contains(response.status.code) else { throw failure(response, operation: "get", key: key) }
        return response.body
    }

    package func head(_ key: String) async throws -> ObjectInfo? {
        let response = try await send(.HEAD, key: key, operation: "head")
        switch response.status.code {
        case 200..<300:
            return ObjectInfo(key: key,
                              size: response.headers.first(name: "content-length").flatMap { UInt64($0) } ?? 0,
                              etag: response.headers.first(name: "etag").map(Self.unquote) ?? "",
                              lastModified: nil)
        case 404: return nil
        default: throw failure(response, operation: "head", key: key)
        }
    }

    package func delete(_ key: String) async throws {
        let response = try await send(.DELETE, key: key, operation: "delete")
        guard (200..<300).contains(response.status.code) || response.status.code == 404 else {
            throw failure(response, operation: "delete", key: key)
        }
    }

    package func list(prefix: String, continuation: String?, maxKeys: Int) async throws -> ObjectListing {
        var query: [(name: String, value: String)] = [("list-type", "2"), ("prefix", prefix), ("max-keys", String(maxKeys))]
        if let continuation { query.append(("continuation-token", continuation)) }
        let response = try await send(.GET, key: nil, query: query, operation: "list")
        guard (200..<300).contains(response.status.code) else { throw failure(response, operation: "list", key: prefix) }
        do {
            return try S3ListingParser.parse(response.body)
        } catch {
            throw StoreError(code: .io, message: "object store at \(endpointDescription) sent a listing of bucket \(configuration.bucket) that does not parse",
                             cause: error)
        }
    }

    // MARK: - Conditional-put detection

    /// Whether the service honours `If-None-Match: *` on PUT, found out once per client by
    /// writing a scratch object twice: a 2xx alone proves nothing (a service that ignores the
    /// header also answers 200), a 412 to the second put does. The scratch object is removed.
    package func supportsConditionalPuts() async throws -> Bool {
        if let known = conditionalPuts.withLock({ $0 }) { return known }
        let probe = "\(Self.probePrefix)\(UUID().uuidString.lowercased())"
        let headers: [(name: String, value: String)] = [("If-None-Match", "*")]
        let first = try await send(.PUT, key: probe, headers: headers, body: [], operation: "probe conditional put")
        var supported = false
        if (200..<300).contains(first.status.code) {
            let second = try await send(.PUT, key: probe, headers: headers, body: [], operation: "probe conditional put")
            supported = second.status.code == 412
        } else if first.status.code != 501 {
            throw failure(first, operation: "probe conditional put", key: probe)
        }
        try await delete(probe)
        conditionalPuts.withLock { $0 = supported }
        logger.info("object store conditional puts", metadata: ["endpoint": "\(endpointDescription)", "supported": "\(supported)"])
        return supported
    }

    /// Where the conditional-put probe writes (and at once removes) its scratch object.
    package static let probePrefix = "probe/"

    private func plainPut(_ key: String, bytes: [UInt8]) async throws -> PutOutcome {
        let response = try await send(.PUT, key: key, body: bytes, operation: "put")
        guard (200..<300).contains(response.status.code) else { throw failure(response, operation: "put", key: key) }
        return .created
    }

    // MARK: - Transport

    struct Response: Sendable {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: [UInt8]
        /// The `<Code>` of an S3 error document, when the body is one.
        var s3Code: String? { S3ErrorDocument(body)?.code }
    }

    private func send(_ method: HTTPMethod, key: String?, query: [(name: String, value: String)] = [],
                      headers extra: [(name: String, value: String)] = [], body: [UInt8]? = nil,
                      operation: String) async throws -> Response {
        guard !isShutDown.withLock({ $0 }) else {
            throw StoreError(code: .closed, message: "the object store client for \(endpointDescription) was shut down")
        }
        var lastError: (any Error)?
        var attempts = 0
        for attempt in 0...configuration.retryDelays.count {
            if attempt > 0 { try await Task.sleep(for: configuration.retryDelays[attempt - 1]) }
            do {
                // async-http-client's own deadline ends at the response head; this one also
                // covers a body that trickles, and a request that never gets a connection.
                attempts += 1
                let response = try await ServiceDeadline.run(within: configuration.requestTimeout) {
                    try await self.sendOnce(method, key: key, query: query, headers: extra, body: body)
                }
                if response.status.code >= 500 || response.status.code == 429 {
                    lastError = S3ServiceError(response: response)
                    continue
                }
                return response
            } catch let error as CancellationError {
                throw error
            } catch let error as ServiceDeadline.Exceeded {
                // A service that let a whole timeout pass will hardly answer the next attempt
                // sooner: the caller hears `unavailable` after one timeout, not several.
                lastError = error
                break
            } catch {
                lastError = error
            }
        }
        let target = key.map { "\(configuration.bucket)/\($0)" } ?? configuration.bucket
        throw StoreError(code: .unavailable,
                         message: "object store at \(endpointDescription) is unavailable (\(operation) \(target), \(attempts) attempt\(attempts == 1 ? "" : "s"))",
                         cause: lastError)
    }

    private func sendOnce(_ method: HTTPMethod, key: String?, query: [(name: String, value: String)],
                          headers extra: [(name: String, value: String)], body: [UInt8]?) async throws -> Response {
        let path = "/" + configuration.bucket + (key.map { "/" + $0 } ?? "")
        let now = Date()
        let payloadHash = body.map { SigV4Signer.hexSHA256($0) } ?? SigV4Signer.emptyPayloadHash
        var headers: [(name: String, value: String)] = [
            ("Host", host), ("X-Amz-Date", SigV4Signer.timestamp(now)), ("X-Amz-Content-SHA256", payloadHash),
        ]
        headers += extra
        let signature = signer.sign(.init(method: method.rawValue, path: path, query: query, headers: headers,
                                          payloadHash: payloadHash), at: now)
        var request = HTTPClientRequest(url: url(path: path, query: query))
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.add(name: "Authorization", value: signature.authorization)
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let timeout = TimeAmount.nanoseconds(Int64(configuration.requestTimeout.components.seconds) * 1_000_000_000)
        let response = try await http.execute(request, timeout: timeout, logger: logger)
        var collected = try await response.body.collect(upTo: configuration.maximumResponseBytes)
        return Response(status: response.status, headers: response.headers,
                        body: collected.readBytes(length: collected.readableBytes) ?? [])
    }

    private func url(path: String, query: [(name: String, value: String)]) -> String {
        let encodedPath = path.split(separator: "/", omittingEmptySubsequences: false)
            .map { SigV4Signer.percentEncode(String($0)) }.joined(separator: "/")
        let scheme = configuration.endpoint.scheme!.lowercased()
        let queryString = query.map { "\(SigV4Signer.percentEncode($0.name))=\(SigV4Signer.percentEncode($0.value))" }
            .joined(separator: "&")
        return "\(scheme)://\(host)\(encodedPath)" + (queryString.isEmpty ? "" : "?" + queryString)
    }

    // MARK: - Errors

    private func failure(_ response: Response, operation: String, key: String?) -> StoreError {
        let target = key.map { "\(configuration.bucket)/\($0)" } ?? configuration.bucket
        let cause = S3ServiceError(response: response)
        let code: StoreError.Code
        let message: String
        switch response.status.code {
        case 401, 403:
            code = .invalidArgument
            message = "object store at \(endpointDescription) refused the credentials of access key ID \(configuration.accessKeyID) (\(operation) \(target))"
        case 404:
            code = .notFound
            message = response.s3Code == "NoSuchBucket"
                ? "object store at \(endpointDescription) has no bucket \(configuration.bucket)"
                : "object store at \(endpointDescription) has no object \(target)"
        case 416:
            code = .invalidArgument
            message = "range outside object \(target) at \(endpointDescription)"
        default:
            code = .io
            message = "object store at \(endpointDescription) refused \(operation) \(target) with HTTP \(response.status.code)"
        }
        return StoreError(code: code, message: message, cause: cause)
    }

    private static func unquote(_ etag: String) -> String {
        etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count >= 2 ? String(etag.dropFirst().dropLast()) : etag
    }

    /// S3's rules for new buckets, which path-style URLs also need: 3-63 characters of lowercase
    /// letters, digits, dots and hyphens, starting and ending with a letter or digit.
    private static func isValidBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        func isAlphanumeric(_ b: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) }
        guard isAlphanumeric(bytes.first!), isAlphanumeric(bytes.last!) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }
}

/// An S3 error response, as the underlying cause of a `StoreError`: status and the error
/// document's code and message (S3 never echoes the secret in them).
package struct S3ServiceError: Error, Sendable, CustomStringConvertible {
    package var status: Int
    package var code: String?
    package var message: String?
    package var requestID: String?

    init(response: S3Client.Response) {
        let document = S3ErrorDocument(response.body)
        status = Int(response.status.code)
        code = document?.code
        message = document?.message
        requestID = document?.requestID ?? response.headers.first(name: "x-amz-request-id")
    }

    package var description: String {
        var text = "HTTP \(status)"
        if let code { text += " \(code)" }
        if let message { text += ": \(message)" }
        if let requestID { text += " (request \(requestID))" }
        return text
    }
}
