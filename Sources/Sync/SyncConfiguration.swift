import Logging

/// How a ``SyncClient`` talks to its server. Every field has a default.
public struct SyncConfiguration: Sendable {
    /// Sent as `Authorization: Bearer <token>`; default none.
    public var token: String?
    /// How often the client syncs on its own, besides the server's announcements; default 10 minutes.
    public var interval: Duration = .seconds(600)
    /// Whether the client syncs in the background (announcements, interval, backoff after failures);
    /// default true. With false it syncs only when ``SyncClient/sync(_:)`` is called.
    public var syncsAutomatically = true
    /// How many times one run retries a transient failure (offline, 5xx, timeout) before it throws; default 3.
    public var retries = 3
    /// The first wait before a retry; each next wait doubles, up to ``maximumBackoff``. Default 200 ms.
    public var initialBackoff: Duration = .milliseconds(200)
    /// The longest wait between retries (also for the background loop); default 1 minute.
    public var maximumBackoff: Duration = .seconds(60)
    /// How long one HTTP request may take; default 60 seconds.
    public var requestTimeout: Duration = .seconds(60)
    /// Where failed syncs are logged (at error) and routine work (at debug); never a token or body.
    public var logger = Logger(label: "contentstore.sync.client")

    /// The defaults.
    public init() {}
}
