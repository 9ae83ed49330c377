#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
internal import CContentStoreSupport
import Foundation
import Logging
import Synchronization

/// Live maintenance: an open store listens on `control.sock` in its directory, so that
/// `contentstore gc|verify|stats|checkpoint` run against a store this process holds are carried out
/// here (ControlProtocol.swift has the protocol, Docs/control-protocol.md the details).
///
/// Invariants owned here:
/// - only peers whose uid is this process's or root's get anything done (SO_PEERCRED); others get
///   a `refused` line and nothing changes. The socket file is mode 0600 before it listens.
/// - the socket exists only while the store is open: a file left by a killed process is replaced
///   at the next open (the store's lock is held then, so no live process is listening on it), and
///   `close()` stops listening and removes the file.
/// - a socket that cannot be created (path too long, read-only directory) is logged; the store
///   opens anyway.
final class ControlServer: Sendable {
    let path: String
    private let listener: Int32
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let acceptorDone = DispatchSemaphore(value: 0)

    /// Starts listening for `store`, or returns nil (logged) when the socket cannot be made.
    static func start(for store: Store) -> ControlServer? {
        let path = store.directory.path + "/" + ControlProtocol.socketName
        // The store's lock is held: whatever is at the path was left by a process that is gone.
        if unlink(path) != 0 && errno != ENOENT {
            store.configuration.logger.warning("control socket not created: a stale socket cannot be removed", metadata: [
                "path": "\(path)", "error": "\(String(cString: strerror(errno)))",
            ])
            return nil
        }
        let listener = cs_unix_listen(path, 16)
        guard listener >= 0 else {
            store.configuration.logger.warning("control socket not created; live maintenance is unavailable", metadata: [
                "path": "\(path)", "error": "\(String(cString: strerror(errno)))",
            ])
            return nil
        }
        let server = ControlServer(path: path, listener: listener, logger: store.configuration.logger)
        // Weak: the acceptor must not keep a store alive that its owner released (deinit closes it).
        weak let weakStore = store
        let thread = Thread { server.acceptLoop { weakStore } }
        thread.name = "ContentStore control"
        thread.start()
        store.configuration.logger.debug("control socket listening", metadata: ["path": "\(path)"])
        return server
    }

    private init(path: String, listener: Int32, logger: Logger) {
        self.path = path
        self.listener = listener
        self.logger = logger
    }

    /// Stops listening and removes the socket file. A request in progress holds the store; the store
    /// being closed makes its operation stop at its next step.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        unlink(path)
        // Wakes the blocked accept() (Linux returns EINVAL for a shut-down listener).
        shutdown(listener, Int32(SHUT_RDWR))
        acceptorDone.wait()
        close(listener)
    }

    /// Accepts connections until stopped; each is served on a thread of its own.
    private func acceptLoop(store: @escaping @Sendable () -> Store?) {
        defer { acceptorDone.signal() }
        while !stopped.load(ordering: .acquiring) {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            // The store is taken on the request's thread: were the acceptor to hold the last
            // reference, the store's deinit would stop this very loop and wait for it.
            let thread = Thread { [self] in
                if let store = store() { serve(connection, store: store) } else { close(connection) }
            }
            thread.name = "ContentStore control request"
            thread.start()
        }
    }

    private func serve(_ connection: Int32, store: Store) {
        defer { close(connection) }
        let channel = LineChannel(descriptor: connection)
        // The request is read before anything is answered, even to a refused peer: closing with its
        // bytes unread would reset the connection, and the peer would never see why.
        let reader = LineReader(descriptor: connection, limit: ControlProtocol.maximumRequestLength)
        let line = reader.next(deadline: .now + ControlProtocol.acknowledgementTimeout)
        var uid: UInt32 = 0
        guard cs_peer_uid(connection, &uid) == 0, uid == getuid() || uid == 0 else {
            logger.warning("control request refused: the peer runs as another user", metadata: ["peerUID": "\(uid)", "path": "\(path)"])
            channel.sendLine(Self.error(code: "refused", message: "the process holding \(store.directory.path) (pid \(getpid()), uid \(getuid())) serves only uid \(getuid()) and root; this peer runs as uid \(uid)"))
            return
        }
        guard let line, let request = try? JSONDecoder().decode(ControlRequest.self, from: line) else {
            channel.sendLine(Self.error(code: "badRequest", message: "expected one JSON request line"))
            return
        }
        guard request.version == ControlProtocol.version else {
            channel.sendLine(Self.error(code: "unsupportedVersion", message: "this process speaks control protocol version \(ControlProtocol.version), not \(request.version)"))
            return
        }
        var accepted = ControlResponse(type: .accepted)
        accepted.pid = getpid()
        guard channel.sendLine(accepted) else { return }
        logger.info("control request", metadata: ["command": "\(request.command.rawValue)"])

        // A cancel line, or the client going away, cancels; the watcher ends when the connection does.
        let token = CancellationToken()
        let watcherDone = DispatchSemaphore(value: 0)
        let watcher = Thread { [logger] in
            var cancelLine = false
            while let line = reader.next() {
                if (try? JSONDecoder().decode(ControlRequest.self, from: line))?.command == .cancel {
                    cancelLine = true
                    break
                }
            }
            token.cancel()
            // Logged once the token is cancelled: from this line on the operation stops at its next batch.
            if cancelLine { logger.info("control request cancelled by the client", metadata: ["command": "\(request.command.rawValue)"]) }
            watcherDone.signal()
        }
        watcher.start()
        let response = CancellationToken.$current.withValue(token) {
            ControlServer.perform(request, on: store, progress: request.progress == true ? { progress in
                var line = ControlResponse(type: .progress)
                line.phase = progress.phase.description
                line.completed = progress.completed
                line.total = progress.total
                channel.sendLine(line)
            } : nil)
        }
        if response.type == .error { logger.info("control request failed", metadata: ["command": "\(request.command.rawValue)", "error": "\(response.message ?? "")"]) }
        channel.sendLine(response)
        // The watcher reads until the client closes (or the connection is shut down here).
        shutdown(connection, Int32(SHUT_RDWR))
        watcherDone.wait()
    }

    /// Runs one request on the calling thread and describes its outcome as a response line.
    static func perform(_ request: ControlRequest, on store: Store, progress: ((MaintenanceProgress) -> Void)?) -> ControlResponse {
        var response = ControlResponse(type: .result)
        do {
            switch request.command {
            case .gc:
                var options = GarbageCollectionOptions()
                if let seconds = request.gracePeriodSeconds {
                    guard seconds.isFinite, seconds >= 0 else { throw StoreError.invalidArgument("the grace period \(seconds) s is not a non-negative number") }
                    options.gracePeriod = .milliseconds(Int64(seconds * 1000))
                }
                options.dryRun = request.dryRun ?? false
                response.gc = try store.collectGarbage(options, progress: progress)
            case .verify:
                response.verify = try store.verify(VerificationOptions(readData: request.readData ?? false), progress: progress)
            case .stats:
                response.stats = try store.statistics()
            case .checkpoint:
                let before = try store.statistics().walBytes
                let started = ContinuousClock.now
                try store.checkpoint()
                let elapsed = ContinuousClock.now - started
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                response.checkpoint = CheckpointReport(walBytesBefore: before, walBytesAfter: try store.statistics().walBytes, duration: seconds)
            case .cancel:
                throw StoreError.invalidArgument("cancel is sent after a request, not instead of one")
            }
        } catch is CancellationError {
            return error(code: "cancelled", message: "the \(request.command.rawValue) was cancelled; the store is consistent")
        } catch let failure as StoreError {
            return error(code: "\(failure.code)", message: failure.message)
        } catch {
            return Self.error(code: "io", message: "\(error)")
        }
        return response
    }

    static func error(code: String, message: String) -> ControlResponse {
        var response = ControlResponse(type: .error)
        response.code = code
        response.message = message
        return response
    }
}
