import ContentStore
import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Serves a `Store` to ``SyncClient``s over HTTP (the API in Docs/sync.md); the server is always right.
///
/// Run it with ``run()`` in a task (or in a ServiceLifecycle `ServiceGroup`: it is a `Service`);
/// it serves until that task is cancelled or the group shuts down. It may run again afterwards, and
/// several servers may run one after another on one store (a restart): everything they hold is in
/// the store.
public final class SyncServer: Sendable {
    let engine: ServerEngine
    private let binding = PortBinding()

    /// A server for `store`; nothing listens until ``run()``.
    public init(store: Store, configuration: SyncServerConfiguration = .init()) {
        engine = ServerEngine(store: store, configuration: configuration)
    }

    /// Listens on the configured host and port and serves until the calling task is cancelled (or,
    /// in a ServiceGroup, until graceful shutdown). Tombstones are collected every
    /// `tombstoneCleanupInterval` meanwhile. Run again, a server configured with port 0 listens on
    /// the port its previous run had, so its clients find it again.
    public func run() async throws {
        let configuration = engine.configuration
        let port = configuration.port != 0 ? configuration.port : binding.reset() ?? 0
        let application = Application(
            router: Routes(engine: engine).router(),
            configuration: .init(address: .hostname(configuration.host, port: port), serverName: "ContentStore-Sync"),
            onServerRunning: { [binding] channel in binding.bound(channel.localAddress?.port ?? 0) },
            logger: configuration.logger)
        defer { engine.announcements.finish() }
        do {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { try await self.collectTombstonesPeriodically() }
                try await application.run()
                group.cancelAll()
            }
        } catch {
            binding.failed(error)
            throw error
        }
    }

    /// The port the server listens on; waits until ``run()`` has bound it (throws if it could not).
    public var port: Int {
        get async throws { try await binding.port() }
    }

    /// Stores `object` as the server's own change (the same write a client's push makes, but never
    /// overruled) and announces it. Returns it with its revision.
    public func persist(_ object: SyncObject) async throws -> SyncObject {
        try await engine.write(object)
    }

    /// Deletes an object: a tombstone every client pulls, dropped once all have.
    public func delete(container: String, id: String) async throws {
        _ = try await engine.write(.tombstone(container: container, id: id, revision: nil))
    }

    /// Drops the tombstones every known client has pulled past (forgetting clients silent longer
    /// than `clientRetention` first); ``run()`` does this every `tombstoneCleanupInterval`.
    /// Returns how many tombstones went.
    @discardableResult
    public func collectTombstones() async throws -> Int {
        try await engine.collectTombstones()
    }

    /// Blob uploads that added bytes the store did not hold, since this server was created.
    package var blobsReceived: Int { engine.blobsReceived }

    private func collectTombstonesPeriodically() async throws {
        while true {
            try await Task.sleep(for: engine.configuration.tombstoneCleanupInterval)
            do {
                try await collectTombstones()
            } catch {
                engine.configuration.logger.error("tombstone collection failed", metadata: ["error": "\(error)"])
            }
        }
    }
}

extension SyncServer: Service {}

/// The bound port, for callers that ask before the server is up.
private final class PortBinding: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Int, any Error>])
        case bound(Int)
        case failed(any Error)
    }
    private let state = Mutex(State.waiting([]))

    /// A new run: callers asking for the port from now on wait for its binding. Returns the port
    /// the previous run had bound, if any.
    func reset() -> Int? {
        state.withLock { state in
            var previous: Int?
            switch state {
            case .waiting: return nil
            case let .bound(port): previous = port
            case .failed: previous = nil
            }
            state = .waiting([])
            return previous
        }
    }

    func bound(_ port: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int, any Error>] in
            guard case let .waiting(waiters) = state else { return [] }
            state = .bound(port)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }

    func failed(_ error: any Error) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int, any Error>] in
            guard case let .waiting(waiters) = state else { return [] }
            state = .failed(error)
            return waiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    func port() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let outcome: Result<Int, any Error>? = state.withLock { state in
                switch state {
                case var .waiting(waiters):
                    waiters.append(continuation)
                    state = .waiting(waiters)
                    return nil
                case let .bound(port): return .success(port)
                case let .failed(error): return .failure(error)
                }
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }
}
