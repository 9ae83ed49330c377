#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
internal import CContentStoreSupport
import Foundation

/// The client side of the control socket, for `contentstore`: asks the process holding a store to
/// run a maintenance operation and returns its report.
package enum ControlClient {
    /// No process answered at the store's control socket (none listening, or no `accepted` line
    /// within ``ControlProtocol/acknowledgementTimeout``): the caller reports the store as locked.
    package struct Unanswered: Error, Sendable {
        package var reason: String
    }

    /// The remote operation was cancelled (``send(_:to:progress:cancelled:)``'s `cancelled` fired).
    package struct Cancelled: Error, Sendable {
        package var message: String
    }

    /// Sends `request` to the process serving `directory` and waits for its `result` line.
    ///
    /// - Parameters:
    ///   - progress: called for each `progress` line.
    ///   - cancellation: a descriptor that becomes readable when the user wants to stop (a
    ///     signal handler's pipe): a `cancel` line is then sent, and the server's answer awaited.
    /// - Throws: ``Unanswered`` when nothing answers in time; ``Cancelled``; a `StoreError` (with
    ///   the server's code and message) when the operation failed there or the peer was refused.
    package static func send(
        _ request: ControlRequest, to directory: URL, progress: ((MaintenanceProgress) -> Void)? = nil, cancellation: Int32? = nil
    ) throws -> ControlResponse {
        let path = directory.standardizedFileURL.path + "/" + ControlProtocol.socketName
        let connection = cs_unix_connect(path)
        guard connection >= 0 else {
            throw Unanswered(reason: "nothing listens at \(path) (\(String(cString: strerror(errno))))")
        }
        defer { close(connection) }
        let channel = LineChannel(descriptor: connection)
        guard channel.sendLine(request) else { throw Unanswered(reason: "the connection to \(path) closed") }
        let reader = LineReader(descriptor: connection)
        guard let first = reader.next(deadline: .now + ControlProtocol.acknowledgementTimeout),
              let acknowledgement = try? JSONDecoder().decode(ControlResponse.self, from: first)
        else {
            throw Unanswered(reason: "the process at \(path) did not answer within \(ControlProtocol.acknowledgementTimeout)")
        }
        if acknowledgement.type == .error { throw error(from: acknowledgement) }
        var cancelSent = false
        while true {
            if let cancellation, !cancelSent, waitForEither(connection, cancellation) == cancellation {
                channel.sendLine(ControlRequest(command: .cancel))
                cancelSent = true
                continue
            }
            guard let line = reader.next(), let response = try? JSONDecoder().decode(ControlResponse.self, from: line) else {
                throw StoreError(code: .io, message: "the process serving \(directory.path) closed the control connection before answering")
            }
            switch response.type {
            case .accepted:
                continue
            case .progress:
                if let phase = response.phase, let completed = response.completed, let total = response.total {
                    progress?(MaintenanceProgress(phase: .init(named: phase), completed: completed, total: total))
                }
            case .result:
                return response
            case .error:
                if response.code == "cancelled" { throw Cancelled(message: response.message ?? "cancelled") }
                throw error(from: response)
            }
        }
    }

    /// Blocks until `connection` or `cancellation` is readable; returns which (the connection first).
    private static func waitForEither(_ connection: Int32, _ cancellation: Int32) -> Int32 {
        var descriptors = [pollfd(fd: connection, events: Int16(POLLIN), revents: 0), pollfd(fd: cancellation, events: Int16(POLLIN), revents: 0)]
        while poll(&descriptors, 2, -1) < 0 && errno == EINTR {}
        return descriptors[0].revents != 0 ? connection : cancellation
    }

    private static let codes: [StoreError.Code] = [
        .notFound, .corrupted, .missingBlob, .invalidArgument, .limitExceeded, .locked, .closed, .unsupportedFormat, .io,
    ]

    private static func error(from response: ControlResponse) -> StoreError {
        let code = codes.first { $0.description == response.code } ?? .io
        return StoreError(code: code, message: response.message ?? "the remote operation failed (\(response.code ?? "unknown"))")
    }
}
