#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The control socket's protocol (Docs/control-protocol.md): newline-delimited JSON over the Unix
/// socket `control.sock` in the store directory, one request per connection.
///
/// Client → server: one ``ControlRequest`` line; later, optionally, a `{"command":"cancel"}` line
/// (closing the connection cancels too). Server → client: an `accepted` line at once, `progress`
/// lines while the operation runs (when asked for), then one `result` or `error` line, and the
/// server closes. Every line carries `version`; a server refuses a version it does not speak.
///
/// Invariant owned here: this file alone knows the wire names; server and client both use it.
package enum ControlProtocol {
    /// The version this build speaks.
    package static let version = 1
    /// The socket's file name in the store directory.
    package static let socketName = "control.sock"
    /// A client that sees no `accepted` line within this long treats the store as locked by a
    /// process that does not answer.
    package static let acknowledgementTimeout: Duration = .seconds(5)
    /// The longest request line a server reads.
    static let maximumRequestLength = 64 * 1024
}

/// What a client asks the process holding the store to do.
package struct ControlRequest: Codable, Sendable, Hashable {
    package enum Command: String, Codable, Sendable {
        case gc, verify, stats, checkpoint, cancel
    }

    package var version = ControlProtocol.version
    package var command: Command
    /// gc: the grace period in seconds (nil: the store's configured one).
    package var gracePeriodSeconds: Double?
    /// gc: report only.
    package var dryRun: Bool?
    /// verify: re-hash every blob.
    package var readData: Bool?
    /// Whether to send `progress` lines.
    package var progress: Bool?

    package init(command: Command, gracePeriodSeconds: Double? = nil, dryRun: Bool? = nil, readData: Bool? = nil, progress: Bool? = nil) {
        self.command = command
        self.gracePeriodSeconds = gracePeriodSeconds
        self.dryRun = dryRun
        self.readData = readData
        self.progress = progress
    }
}

/// One line from the server.
package struct ControlResponse: Codable, Sendable {
    package enum Kind: String, Codable, Sendable {
        case accepted, progress, result, error
    }

    package var version = ControlProtocol.version
    package var type: Kind
    /// accepted: the serving process.
    package var pid: Int32?
    /// progress: the phase's description, items done, items in the phase.
    package var phase: String?
    package var completed: Int?
    package var total: Int?
    /// result: the operation's report, as the command prints it with `--json`.
    package var gc: GarbageCollectionReport?
    package var verify: VerificationReport?
    package var stats: Statistics?
    package var checkpoint: CheckpointReport?
    /// error: a `StoreError` code name (`notFound`, `closed`, ...), or `cancelled`, `refused`,
    /// `badRequest`, `unsupportedVersion`; and a message naming the cause.
    package var code: String?
    package var message: String?

    init(type: Kind) { self.type = type }
}

/// What `checkpoint` did: the WAL's size before and after, and how long it took (seconds).
package struct CheckpointReport: Codable, Sendable, Hashable {
    package var walBytesBefore: UInt64
    package var walBytesAfter: UInt64
    package var duration: Double

    package init(walBytesBefore: UInt64, walBytesAfter: UInt64, duration: Double) {
        self.walBytesBefore = walBytesBefore
        self.walBytesAfter = walBytesAfter
        self.duration = duration
    }
}

extension MaintenanceProgress.Phase {
    /// A phase as a remote process named it.
    package init(named name: String) { self.init(description: name) }
}

/// One JSON value per line, in and out of a socket descriptor.
struct LineChannel: Sendable {
    let descriptor: Int32

    /// Writes `value` as one line. Returns false when the peer is gone.
    @discardableResult
    func sendLine<T: Encodable>(_ value: T) -> Bool {
        guard var bytes = try? JSONEncoder().encode(value) else { return false }
        bytes.append(UInt8(ascii: "\n"))
        return bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let count = send(descriptor, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                sent += count
            }
            return true
        }
    }
}

/// Reads newline-delimited lines from a descriptor, with an optional deadline per line. Used by one
/// thread at a time (a server reads the request, then hands the reader to the thread watching for a
/// cancel line), hence unchecked.
final class LineReader: @unchecked Sendable {
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private let limit: Int

    init(descriptor: Int32, limit: Int = 1 << 20) {
        self.descriptor = descriptor
        self.limit = limit
    }

    /// The next line (without its newline); nil at end of input, on an error, past `deadline`, or
    /// for a line over the limit.
    func next(deadline: ContinuousClock.Instant? = nil) -> Data? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            guard buffer.count <= limit else { return nil }
            if let deadline {
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return nil }
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(&poller, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { return nil }
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}
