/// What one sync run did.
public struct SyncReport: Hashable, Sendable {
    /// Local changes the server applied in this run.
    public var pushed: Int
    /// Server changes applied to the local store.
    public var pulled: Int
    /// Local versions overruled or rejected in this run (kept as conflicts).
    public var conflicts: Int
    /// HTTP request body bytes sent (blobs and JSON).
    public var bytesSent: Int64
    /// HTTP response body bytes received (blobs and JSON).
    public var bytesReceived: Int64

    /// A report; every count defaults to zero.
    public init(pushed: Int = 0, pulled: Int = 0, conflicts: Int = 0, bytesSent: Int64 = 0, bytesReceived: Int64 = 0) {
        self.pushed = pushed
        self.pulled = pulled
        self.conflicts = conflicts
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
    }
}
