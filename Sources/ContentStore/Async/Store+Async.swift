import Foundation

/// The async twins of `Store`'s blocking methods: the same names and semantics (GRDB's convention;
/// in async code the compiler picks these and asks for `await`).
///
/// Invariant owned here: blocking work — file I/O, `fsync`, waiting for a group commit or a lock —
/// runs on the store's own threads (``IOThreadPool``), never on the cooperative pool or an event
/// loop. What only reads memory under a short lock (a record, a key listing, a blob in the read
/// cache) is answered on the calling task, which costs no thread hop; so is a `write` whose
/// transaction finds the writer lock free, up to its commit's append (the wait for durability
/// holds no thread: the group commit's leader resumes the task).
///
/// Cancellation: a call still waiting for a thread when its task is cancelled throws
/// `CancellationError` and does nothing. `write` checks again as its body starts: a task cancelled
/// before then commits nothing; once the body runs, the commit completes and the caller learns its
/// outcome. `collectGarbage`, `verify`, `put(contentsOf:)` and `export` check between batches and
/// stop with `CancellationError`, leaving the store consistent (what earlier batches did stands).
extension Store {
    /// Stores `data` as a blob and returns its digest (``put(_:)-(Data)``), on the store's threads.
    @discardableResult
    public func put(_ data: Data) async throws -> Digest {
        try await ioThreads.run { try self.put(data) }
    }

    /// The bytes of the blob with `digest` (``get(_:)-(Digest)``). A blob in the read cache is
    /// returned at once; anything else is read on the store's threads.
    public func get(_ digest: Digest) async throws -> Data {
        if let cached = try cachedBlob(digest) { return cached }
        return try await ioThreads.run { try self.get(digest) }
    }

    /// Stores the contents of a file as a blob (``put(contentsOf:)-(URL)``), reading it in pieces on the
    /// store's threads. Cancellation stops it between pieces; what was stored is unreferenced garbage.
    @discardableResult
    public func put(contentsOf file: URL) async throws -> Digest {
        try await ioThreads.run { try self.put(contentsOf: file) }
    }

    /// Writes a blob to `file` (``export(_:to:)-(Digest,URL)``). Cancellation stops it between chunks
    /// and leaves `file` as it was (the temporary file is removed).
    public func export(_ digest: Digest, to file: URL) async throws {
        try await ioThreads.run { try self.export(digest, to: file) }
    }

    /// The latest committed record under `key`, or nil. Reads memory only: answered on the calling task.
    public func record(forKey key: String) async throws -> Record? {
        try blocking { try self.record(forKey: key) }
    }

    /// The committed keys that start with `prefix`, sorted. Reads memory only: answered on the calling task.
    public func keys(withPrefix prefix: String) async throws -> [String] {
        try blocking { try self.keys(withPrefix: prefix) }
    }

    /// Runs `body` on the store's threads with one consistent snapshot of the records (``read(_:)-(_)``).
    public func read<T: Sendable>(_ body: @Sendable (Snapshot) throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            try await ioThreads.run { try self.read(body) }
        }
    }

    /// Runs `body` as one atomic transaction and commits what it changed (``write(_:)-(_)``); durable
    /// when it returns with ``Durability/full``.
    ///
    /// When no other transaction is running, `body` runs and commits on the calling task (memory and
    /// short locks only) and the task is suspended, holding no thread, until the leader of the group
    /// commit that covers it resumes it; the batch's write and sync run on the store's threads. When
    /// another transaction is running, the whole call waits on the store's threads instead.
    ///
    /// A task cancelled before `body` starts gets `CancellationError` and commits nothing; once `body`
    /// runs, the commit completes (or fails) whatever happens to the task, and the result is returned.
    @discardableResult
    public func write<T: Sendable>(_ body: @Sendable (inout Transaction) throws -> T) async throws -> T {
        // No transaction running: the body runs and commits here, which takes memory and short locks
        // only; the batch's write and sync, when this commit must lead one, go to a store thread, and
        // the leader resumes this task once the commit is durable (no thread hop at all).
        try Task.checkCancellation()
        if let pending = try engine.writeIfUncontended(body, leader: { [ioThreads] lead in ioThreads.submit(lead) }) {
            return try await withCheckedThrowingContinuation { continuation in
                pending.whenDue { failure in continuation.resume(with: failure.map { .failure($0) } ?? .success(pending.value)) }
            }
        }
        return try await withoutActuallyEscaping(body) { body in
            // The body runs and commits on a store thread, which then returns to the pool: the leader
            // of the batch that makes the commit durable resumes this task (one wake-up, not two).
            try await ioThreads.run(deferring: {
                try self.engine.writeDeferringAcknowledgment { transaction in
                    try CancellationToken.checkCancellation()
                    return try body(&transaction)
                }
            })
        }
    }

    /// Collects garbage (``collectGarbage(_:)-(GarbageCollectionOptions)``) on the store's threads.
    /// Cancellation stops it between batches with `CancellationError`; what earlier batches removed
    /// stays removed, and the store stays consistent.
    public func collectGarbage(_ options: GarbageCollectionOptions = .init()) async throws -> GarbageCollectionReport {
        try await ioThreads.run { try self.collectGarbage(options) }
    }

    /// ``collectGarbage(_:)-(GarbageCollectionOptions)``, calling `progress` (on one of the store's
    /// threads) as the work advances.
    public func collectGarbage(
        _ options: GarbageCollectionOptions, progress: @escaping @Sendable (MaintenanceProgress) -> Void
    ) async throws -> GarbageCollectionReport {
        try await ioThreads.run { try self.collectGarbage(options, progress: progress) }
    }

    /// Writes a checkpoint (``checkpoint()-()``) on the store's threads.
    public func checkpoint() async throws {
        try await ioThreads.run { try self.checkpoint() }
    }

    /// Checks the store (``verify(_:)-(VerificationOptions)``) on the store's threads. Cancellation
    /// stops it between batches of blobs with `CancellationError`.
    public func verify(_ options: VerificationOptions = .init()) async throws -> VerificationReport {
        try await ioThreads.run { try self.verify(options) }
    }

    /// ``verify(_:)-(VerificationOptions)``, calling `progress` (on one of the store's threads) as the
    /// work advances.
    public func verify(
        _ options: VerificationOptions, progress: @escaping @Sendable (MaintenanceProgress) -> Void
    ) async throws -> VerificationReport {
        try await ioThreads.run { try self.verify(options, progress: progress) }
    }

    /// Counts blobs, records and bytes (``statistics()-()``) on the store's threads.
    public func statistics() async throws -> Statistics {
        try await ioThreads.run { try self.statistics() }
    }

    /// Makes everything durable and releases the store (``close()-()``), on the store's threads.
    /// Idempotent.
    public func close() async throws {
        try await ioThreads.run { try self.close() }
    }

    /// Calls the blocking overload from async code (a synchronous closure selects it); for work
    /// that only reads memory under a short lock.
    private func blocking<T>(_ body: () throws -> T) rethrows -> T {
        try body()
    }

    /// The blob from the engine's memory, counted as a get, or nil when it is not there (the
    /// blocking get then counts it).
    private func cachedBlob(_ digest: Digest) throws -> Data? {
        try engine.cachedBlob(digest)
    }
}

extension Store {
    /// Runs a facade's blocking call (one that commits through ``write(_:)`` and waits for it) on the
    /// store's I/O threads, as the async twins run theirs: never on the cooperative pool, and a task
    /// cancelled while the call is still queued gets `CancellationError` without it running.
    package func runBlocking<T: Sendable>(_ operation: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await ioThreads.run(operation)
    }

    /// Starts a facade's blocking work on the store's I/O threads and returns at once; `work` reports
    /// its own outcome. For work a facade's own queue starts when its turn comes (DataArchive's per-key
    /// order), so no task has to wake up in between only to hand it over.
    package func startBlocking(_ work: @escaping @Sendable () -> Void) {
        ioThreads.submit(work)
    }
}
