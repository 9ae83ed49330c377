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
        let previous = binding.starting()
        let port = configuration.port != 0 ? configuration.port : previous ?? 0
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

    /// The port the server listens on; waits until ``run()`` has bound it (throws if it could not,
    /// and `SyncError.notRunning` if `run()` was not called within `startTimeout`).
    public var port: Int {
        get async throws { try await binding.port(startTimeout: engine.configuration.startTimeout) }
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
///
/// Invariant owned here: every caller of ``port(startTimeout:)`` is answered: with the port once a
/// run binds it, with the run's error if it fails, or with `notRunning` if no run starts in time.
private final class PortBinding: Sendable {
    private enum State {
        /// No run has started; the callers wait for one, each until its deadline.
        case idle([Waiter])
        /// A run started and has not bound its port yet.
        case starting([Waiter])
        case bound(Int)
        case failed(any Error)
    }
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Int, any Error>
    }
    private let state = Mutex(State.idle([]))
    private let nextWaiter = Atomic<UInt64>(0)

    /// A run starts: callers asking for the port from now on wait for its binding. Returns the port
    /// the previous run had bound, if any.
    func starting() -> Int? {
        state.withLock { state in
            switch state {
            case let .idle(waiters), let .starting(waiters):
                state = .starting(waiters)
                return nil
            case let .bound(port):
                state = .starting([])
                return port
            case .failed:
                state = .starting([])
                return nil
            }
        }
    }

    func bound(_ port: Int) {
        finish(.success(port))
    }

    func failed(_ error: any Error) {
        finish(.failure(error))
    }

    private func finish(_ outcome: Result<Int, any Error>) {
        let waiters = state.withLock { state -> [Waiter] in
            guard case let .starting(waiters) = state else { return [] }
            switch outcome {
            case let .success(port): state = .bound(port)
            case let .failure(error): state = .failed(error)
            }
            return waiters
        }
        for waiter in waiters { waiter.continuation.resume(with: outcome) }
    }

    func port(startTimeout: Duration) async throws -> Int {
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        return try await withCheckedThrowingContinuation { continuation in
            let waiter = Waiter(id: id, continuation: continuation)
            let (outcome, idle): (Result<Int, any Error>?, Bool) = state.withLock { state in
                switch state {
                case var .idle(waiters):
                    waiters.append(waiter)
                    state = .idle(waiters)
                    return (nil, true)
                case var .starting(waiters):
                    waiters.append(waiter)
                    state = .starting(waiters)
                    return (nil, false)
                case let .bound(port): return (.success(port), false)
                case let .failed(error): return (.failure(error), false)
                }
            }
            if let outcome {
                continuation.resume(with: outcome)
            } else if idle {
                Task { [self] in
                    try? await Task.sleep(for: startTimeout)
                    expire(id, after: startTimeout)
                }
            }
        }
    }

    /// Answers waiter `id` with `notRunning` if it is still waiting for a run to start.
    private func expire(_ id: UInt64, after timeout: Duration) {
        let expired = state.withLock { state -> Waiter? in
            guard case var .idle(waiters) = state, let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = waiters.remove(at: index)
            state = .idle(waiters)
            return waiter
        }
        expired?.continuation.resume(throwing: SyncError(
            code: .notRunning, message: "SyncServer.port: run() was not called within \(timeout), so no port is bound"))
    }
}
