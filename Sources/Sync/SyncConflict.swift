/// A local version the server did not take, kept (with its blobs) until ``SyncClient/resolve(_:keepingLocal:)``.
public struct SyncConflict: Hashable, Sendable {
    /// The overruled or rejected local version.
    public var local: SyncObject
    /// What the server holds; nil when it holds nothing, or for a rejection.
    public var server: SyncObject?
    /// Why the server did not take the local version.
    public var reason: Reason

    /// Why a local version was not taken.
    public enum Reason: Hashable, Sendable {
        /// The object changed on the server since the local edit's base: the server's version won.
        case overruled
        /// The server refused the change with a 4xx status (too large, invalid name, ...); not retried.
        case rejected(status: Int, message: String)
    }

    /// A conflict as the client reports it.
    public init(local: SyncObject, server: SyncObject?, reason: Reason) {
        self.local = local
        self.server = server
        self.reason = reason
    }
}
