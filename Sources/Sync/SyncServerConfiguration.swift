import Foundation
import Logging

/// How a ``SyncServer`` listens and what it accepts. Every field has a default.
public struct SyncServerConfiguration: Sendable {
    /// The address to bind; default "127.0.0.1".
    public var host: String = "127.0.0.1"
    /// The port to bind; default 0: any free port (``SyncServer/port`` tells which).
    public var port: Int = 0
    /// Accepted bearer tokens; empty (the default) means no authentication.
    public var tokens: Set<String> = []
    /// The largest blob (body or attachment) accepted, in bytes; default 256 MiB. Larger uploads get 413.
    public var maximumBlobSize: Int = 256 << 20
    /// A client silent longer than this (default 30 days) is forgotten, so tombstones need not wait
    /// for it; when it comes back it resyncs fully.
    public var clientRetention: Duration = .seconds(30 * 24 * 3600)
    /// How often a running server drops tombstones every known client has pulled; default one hour.
    public var tombstoneCleanupInterval: Duration = .seconds(3600)
    /// The largest JSON request (a push batch or a have/want list), in bytes; default 16 MiB.
    public var maximumRequestSize: Int = 16 << 20
    /// How long ``SyncServer/port`` waits for ``SyncServer/run()`` to be called before it throws
    /// `SyncError.notRunning`; default 10 seconds. Once `run()` has started, `port` waits for the bind.
    public var startTimeout: Duration = .seconds(10)
    /// The clock for client retention (injectable for tests).
    public var now: @Sendable () -> Date = { Date() }
    /// Where requests and failures are logged; never a token, a body or blob bytes.
    public var logger = Logger(label: "contentstore.sync.server")

    /// The defaults.
    public init() {}
}
