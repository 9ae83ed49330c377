import Foundation

extension Store {
    /// The latest committed record under `key`, or nil.
    public func record(forKey key: String) throws -> Record? {
        try checkOpen()
        try Store.validate(key: key, limits: configuration.limits)
        return published.withLock { $0.records[key] }
    }

    /// The committed keys that start with `prefix`, in ascending order.
    public func keys(withPrefix prefix: String) throws -> [String] {
        try checkOpen()
        return published.withLock { $0.records }.keys(withPrefix: prefix)
    }

    /// Runs `body` with one consistent snapshot of the records. Writers are not blocked.
    public func read<T>(_ body: (Snapshot) throws -> T) throws -> T {
        try body(try makeSnapshot())
    }

    /// Runs `body` on the latest committed records without registering a snapshot, which costs the
    /// store's central lock and a registration: for short reads from threads that contend for it.
    ///
    /// The records `body` sees are one consistent state, and a blob it gets is right or `notFound`:
    /// without a pin, a blob that a newer commit dropped can be collected meanwhile (once its grace
    /// period has passed). Then `body` runs again on a snapshot (``read(_:)``), so it sees what
    /// ``read(_:)`` would have; it may run twice and must have no other effects.
    package func readLatest<T>(_ body: (Snapshot) throws -> T) throws -> T {
        try checkOpen()
        let latest = Snapshot(records: published.withLock { $0.records }, store: self, pin: nil)
        configuration.afterTakingUnpinnedView?(self)
        do {
            return try body(latest)
        } catch let error as StoreError where error.code == .notFound {
            return try read(body)
        }
    }

    /// A snapshot that stays consistent, and keeps the blobs it references from collection, for as
    /// long as it (or a copy) exists. ``read(_:)`` is the scoped form; use this for readers that
    /// outlive one call, such as a lazy iterator.
    public func makeSnapshot() throws -> Snapshot {
        try checkOpen()
        // Under the core lock, where commits take their time and apply: a commit that unreferences
        // a blob this snapshot sees either applied before (and is pending in `horizon`, or published
        // and so not seen) or takes its time after `now`. Either way collection spares the blob.
        return core.withLock { _ in
            let now = nowSeconds
            return published.withLock { published in
                // The pin is registered under the same lock, so collection sees it or sees the records it read.
                let pin = snapshots.pin(at: min(now, published.horizon ?? now))
                return Snapshot(records: published.records, store: self, pin: pin)
            }
        }
    }

    /// Runs `body` as one atomic transaction and commits what it changed.
    ///
    /// All or nothing: if `body` throws, nothing is committed. With ``Durability/full`` the commit is
    /// on stable storage when `write` returns. Transactions run one at a time, each seeing the last.
    ///
    /// - Throws: `missingBlob` if a record references a digest the store does not hold (nothing is
    ///   committed), `limitExceeded` / `invalidArgument` for bad keys and values, or what `body` threw.
    @discardableResult
    public func write<T>(_ body: (inout Transaction) throws -> T) throws -> T {
        try checkOpen()
        let started = ContinuousClock.now
        let result: T
        let flushTo: UInt64
        let committed: Bool
        writer.lock()
        do {
            // Released before the flush, so the next transaction joins this one's group commit.
            defer { writer.unlock() }
            let changes: [LogRecord.Change]
            do {
                // Ends before the commit: a base still held would make it copy the path it changes.
                var transaction = Transaction(base: core.withLock { $0.state.records }, limits: configuration.limits)
                result = try body(&transaction)
                changes = transaction.effectiveChanges
            }
            if changes.isEmpty {
                // A transaction that changed nothing still returns only once the state it saw is durable:
                // it may have read (or rewritten unchanged) a commit that another writer has not synced yet.
                // (Read only then: it takes the lock every committer contends for.)
                flushTo = wal.appendedLSN
                committed = false
            } else {
                flushTo = try commit(changes)
                committed = true
            }
        }
        try flushLog(upTo: flushTo, synchronously: configuration.durability == .full)
        if committed { scheduleCheckpointIfNeeded() }
        if committed { noteCommit(since: started) }
        return result
    }

    /// Returns once the log is written up to `lsn` (and, when `synchronously`, durable), and what it
    /// covers is published. Each batch is taken under the core lock, where the records as of its end
    /// are noted for publishing.
    func flushLog(upTo lsn: UInt64, synchronously: Bool) throws {
        try logFailure("the write-ahead log could not be written or synced") {
            try wal.flush(upTo: lsn, synchronously: synchronously) { take in
                try core.withLock { core in try takeBatch(take, core: &core) }
            }
        }
        // The first committer of a batch to get here publishes all of it; the others skip the lock.
        guard publishedLSN.load(ordering: .acquiring) < lsn else { return }
        let covered = max(lsn, synchronously ? wal.durableLSN : wal.writtenLSN)
        // The replaced versions are returned, so they are freed after the lock is released.
        _ = published.withLock { published in
            let (lsn, replaced) = published.publish(upTo: covered)
            publishedLSN.store(lsn, ordering: .releasing)
            return replaced
        }
    }

    /// Takes a log batch (``BatchTaking``) with the core lock held, so the records are as of its
    /// end, and notes them for publishing.
    func takeBatch(_ take: () throws -> UInt64, core: inout Core) throws {
        let end = try take()
        published.withLock { $0.taken(core.state.records, upTo: end) }
    }

    /// Applies and logs a transaction's changes under the core lock.
    /// Returns the commit's LSN.
    private func commit(_ changes: [LogRecord.Change]) throws -> UInt64 {
        return try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            // Taken under the lock so commit times rise with LSNs (``Published/horizon`` relies on it).
            let time = nowSeconds
            if let missing = core.state.firstMissingReference(in: changes) {
                throw StoreError(
                    code: .missingBlob,
                    message: "record \"\(Store.describe(missing.key))\" references blob \(missing.digest), which the store does not hold")
            }
            let record = LogRecord.Commit(sequence: core.state.commitSequence + 1, time: time, changes: changes)
            let lsn = try wal.append(.commit(record))
            do {
                try core.state.apply(record)
            } catch {
                // Checked above, so unreachable short of a bug; the log already has the record, so stop here.
                throw StoreError(code: .corrupted, message: "commit could not be applied: \(error)")
            }
            published.withLock { $0.applied(lsn: lsn, time: time) }
            return lsn
        }
    }
}
