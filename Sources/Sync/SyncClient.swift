import ContentStore
import Foundation
import Synchronization

/// Keeps a local `Store` usable offline and in step with a ``SyncServer``; the server is always right.
///
/// Every local operation works with no server and is durable when it returns. ``sync(_:)`` pushes
/// the pending changes, then pulls; with `syncsAutomatically` (the default) the client also syncs
/// after each local change, when the server announces a new change, and every
/// `configuration.interval`, backing off while the server is unreachable.
///
/// Two clients opened on the same store with the same client ID share one state (the first one's
/// server and configuration). Each client ID keeps its own records under `sync/client/<id>/`.
public final class SyncClient: Sendable {
    let engine: ClientEngine
    private let background: Background?

    /// A client for `local`, syncing with the server at `server` (e.g. `http://127.0.0.1:8080`) as
    /// `clientID`, which must stay the same across restarts for pending work to be pushed exactly once.
    /// Throws `invalidArgument` for a client ID that is empty, has NUL or "/", or is over 256 bytes.
    public convenience init(local: Store, server: URL, clientID: String, configuration: SyncConfiguration = .init()) throws {
        try self.init(local: local, clientID: clientID, configuration: configuration,
                      transport: HTTPTransport(server: server, token: configuration.token, timeout: configuration.requestTimeout))
    }

    /// A client over any transport: the seam tests use to lose responses.
    init(local: Store, clientID: String, configuration: SyncConfiguration, transport: any SyncTransport) throws {
        engine = try SharedObjects.object(for: ClientEngine.key(store: local, clientID: clientID)) {
            try ClientEngine(store: local, clientID: clientID, configuration: configuration, transport: transport)
        }
        background = configuration.syncsAutomatically ? Background(engine: engine) : nil
    }

    deinit { background?.stop() }

    /// Stores a version locally and durably at once, marked pending; pushed when online.
    public func persist(_ object: SyncObject) async throws {
        try await engine.persist(object)
        background?.wake()
    }

    /// Deletes an object locally (a tombstone, pending); pushed when online.
    public func delete(container: String, id: String) async throws {
        try await engine.delete(container: container, id: id)
        background?.wake()
    }

    /// The local version of an object, never asking the network: a live object, a tombstone
    /// (`isDeleted`) while a local delete is pending, nil when there is none.
    public func object(container: String, id: String) throws -> SyncObject? {
        try engine.object(container: container, id: id)
    }

    /// The live local objects of a container, sorted by id; never asks the network.
    public func objects(in container: String) throws -> [SyncObject] {
        try engine.objects(in: container)
    }

    /// Pushes every pending change (of `container`, or all), then pulls. Returns when every change
    /// persisted before the call is pushed and a pull started after the call has finished;
    /// concurrent callers share runs. Transient failures are retried with backoff, then thrown as
    /// `unavailable`, the pending work kept.
    public func sync(_ container: String? = nil) async throws -> SyncReport {
        try await engine.sync(container)
    }

    /// How many objects have local changes the server has not taken yet (conflicts are not pending).
    public var pendingCount: Int {
        get throws { try engine.pendingCount }
    }

    /// Local changes, pulled changes, conflicts, and going online or offline, from now on.
    public var events: AsyncStream<SyncEvent> { engine.events.subscribe() }

    /// The local versions the server overruled or rejected, kept until resolved.
    public func conflicts() throws -> [SyncConflict] {
        try engine.conflicts()
    }

    /// Keeping the local version pushes it again as a new change on top of the server's; not keeping
    /// it drops it. Throws `conflictNotFound` when the conflict is no longer kept.
    public func resolve(_ conflict: SyncConflict, keepingLocal: Bool) async throws {
        try await engine.resolve(conflict, keepingLocal: keepingLocal)
        if keepingLocal { background?.wake() }
    }
}

/// The automatic syncs of one client: after local changes, on the server's announcements, every
/// interval, and with backoff while the server is unreachable.
private final class Background: Sendable {
    private let wakes: AsyncStream<Void>.Continuation
    private let tasks: Mutex<[Task<Void, Never>]>

    init(engine: ClientEngine) {
        let (stream, wakes) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.wakes = wakes
        let configuration = engine.configuration
        let worker = Task {
            var backoff = configuration.initialBackoff
            for await _ in stream {
                do {
                    _ = try await engine.sync(nil)
                    backoff = configuration.initialBackoff
                } catch is CancellationError {
                    return
                } catch {
                    try? await Task.sleep(for: backoff)
                    backoff = min(backoff * 2, configuration.maximumBackoff)
                    wakes.yield()
                }
            }
        }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: configuration.interval)
                wakes.yield()
            }
        }
        let listener = Task { await Self.listen(engine, wakes: wakes) }
        tasks = Mutex([worker, ticker, listener])
        wakes.yield()
    }

    func wake() { wakes.yield() }

    func stop() {
        wakes.finish()
        for task in tasks.withLock({ $0 }) { task.cancel() }
    }

    /// Follows the server's announcements, syncing at once when the server's sequence moves.
    private static func listen(_ engine: ClientEngine, wakes: AsyncStream<Void>.Continuation) async {
        let configuration = engine.configuration
        var backoff = configuration.initialBackoff
        while !Task.isCancelled {
            do {
                for try await _ in try await engine.transport.events("/v1/events") {
                    backoff = configuration.initialBackoff
                    wakes.yield()
                }
            } catch {
                engine.configuration.logger.debug("announcements unavailable", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, configuration.maximumBackoff)
        }
    }
}
