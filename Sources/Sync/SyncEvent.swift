/// What a ``SyncClient`` reports on ``SyncClient/events``.
public enum SyncEvent: Hashable, Sendable {
    /// Objects changed in the local store (a local write, or changes pulled from the server).
    case changed(container: String, ids: [String])
    /// A local version was overruled or rejected and kept as a conflict.
    case conflict(SyncConflict)
    /// The server answered after being unreachable (or for the first time).
    case online
    /// The server could not be reached; local work goes on and is pushed later.
    case offline
}
