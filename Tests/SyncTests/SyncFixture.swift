import ContentStore
import Foundation
import Synchronization
@testable import Sync

/// A test's own directory with stores, a real server on 127.0.0.1, and clients talking to it over HTTP.
final class SyncFixture: @unchecked Sendable {
    let directory: URL
    private var stores: [Store] = []

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sync-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        for store in stores { try? store.close() }
        try? FileManager.default.removeItem(at: directory)
    }

    func storeURL(_ name: String) -> URL { directory.appendingPathComponent(name, isDirectory: true) }

    /// Opens (or reopens) the store `name`; closed when the fixture goes.
    func store(_ name: String) throws -> Store {
        let store = try Store(at: storeURL(name))
        stores.append(store)
        return store
    }

    /// Starts a server on `store`; stop it with ``RunningServer/stop()``.
    func startServer(_ store: Store, _ configure: (inout SyncServerConfiguration) -> Void = { _ in }) async throws -> RunningServer {
        var configuration = SyncServerConfiguration()
        configure(&configuration)
        let server = SyncServer(store: store, configuration: configuration)
        let task = Task { try await server.run() }
        let port = try await server.port
        return RunningServer(server: server, task: task, url: URL(string: "http://127.0.0.1:\(port)")!, port: port)
    }

    /// A client that syncs only when asked, retrying quickly.
    func client(_ store: Store, _ url: URL, _ clientID: String, _ configure: (inout SyncConfiguration) -> Void = { _ in }) throws -> SyncClient {
        try SyncClient(local: store, server: url, clientID: clientID, configuration: Self.configuration(configure))
    }

    /// A client over a transport a test controls.
    func client(_ store: Store, transport: any SyncTransport, _ clientID: String,
                _ configure: (inout SyncConfiguration) -> Void = { _ in }) throws -> SyncClient {
        try SyncClient(local: store, clientID: clientID, configuration: Self.configuration(configure), transport: transport)
    }

    /// The tests' request timeout: only a hung request reaches it. On a loaded machine a shorter
    /// one (the default is 60 s) turns a slow request into a retry, which re-sends its bytes, and the
    /// byte and request counts tests assert assume none.
    static let requestTimeout: Duration = .seconds(300)

    static func configuration(_ configure: (inout SyncConfiguration) -> Void) -> SyncConfiguration {
        var configuration = SyncConfiguration()
        configuration.syncsAutomatically = false
        configuration.retries = 2
        configuration.initialBackoff = .milliseconds(20)
        configuration.requestTimeout = requestTimeout
        configure(&configuration)
        return configuration
    }
}

struct RunningServer: Sendable {
    let server: SyncServer
    let task: Task<Void, any Error>
    let url: URL
    let port: Int

    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

/// A URL where nothing listens: a client pointed at it is offline.
let offlineURL = URL(string: "http://127.0.0.1:9")!

extension SyncObject {
    static func note(_ id: String, _ text: String, container: String = "notes", attachments: [String: Data] = [:]) -> SyncObject {
        SyncObject(container: container, id: id, body: Data(text.utf8), attachments: attachments)
    }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// The real transport, with a hook run around each push: to lose its response or stop the server
/// between the request and the answer.
final class HookedTransport: SyncTransport, @unchecked Sendable {
    let base: HTTPTransport
    /// Called after a push request reached the server; returning true loses the response.
    let afterPush: Mutex<(@Sendable () async -> Bool)?>
    let pushes = Atomic<Int>(0)

    init(_ url: URL, token: String? = nil, afterPush: (@Sendable () async -> Bool)?) {
        base = HTTPTransport(server: url, token: token, timeout: SyncFixture.requestTimeout)
        self.afterPush = Mutex(afterPush)
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let response = try await base.send(request)
        guard request.path == "/v1/push" else { return response }
        pushes.add(1, ordering: .relaxed)
        let hook = afterPush.withLock { hook in
            defer { hook = nil }
            return hook
        }
        if let hook, await hook() {
            throw TransportFailure(endpoint: "POST /v1/push", cause: "the test lost the response")
        }
        return response
    }

    func events(_ path: String) async throws -> AsyncThrowingStream<String, any Error> {
        try await base.events(path)
    }
}

/// Polls `condition` until it holds or `timeout` passes. The timeout only bounds how long a test
/// that is going to fail takes to do so: a loaded machine must not fail one that is not.
func eventually(timeout: Duration = .seconds(300), _ condition: () throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try condition()
}

/// The real transport, counting requests by method and path (without the query).
final class CountingTransport: SyncTransport, @unchecked Sendable {
    let base: HTTPTransport
    private let requests = Mutex<[String]>([])

    init(_ url: URL) {
        base = HTTPTransport(server: url, token: nil, timeout: SyncFixture.requestTimeout)
    }

    /// Requests whose "METHOD /path" is `endpoint`, or starts with it when it ends in "/".
    func count(_ endpoint: String) -> Int {
        requests.withLock { sent in sent.filter { endpoint.hasSuffix("/") ? $0.hasPrefix(endpoint) : $0 == endpoint }.count }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let endpoint = "\(request.method) \(request.path.prefix { $0 != "?" })"
        requests.withLock { $0.append(endpoint) }
        return try await base.send(request)
    }

    func events(_ path: String) async throws -> AsyncThrowingStream<String, any Error> {
        try await base.events(path)
    }
}
