/// What makes the packs' appends durable along with a WAL batch (``PackStore/prepareCommit(loggingUpTo:)``).
struct PackCommitPlan {
    /// The bytes appended since they were last synced or logged, for the batch to carry.
    var logged: [LogRecord.PackBytes] = []
    /// Packs to sync before the batch is written.
    var files: [File] = []
    /// Whether the pack directory needs a sync before the batch (a pack was created).
    var directory = false
}
