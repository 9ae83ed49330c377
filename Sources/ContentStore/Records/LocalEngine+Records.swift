import Foundation

extension LocalEngine {
    /// The latest committed record under `key`, or nil.
    func record(forKey key: String) throws -> Record? {
        try checkOpen()
        return commits.published.withLock { $0.records[key] }
    }

    /// The committed keys that start with `prefix`, in ascending order.
    func keys(withPrefix prefix: String) throws -> [String] {
        try checkOpen()
        return commits.published.withLock { $0.records }.keys(withPrefix: prefix)
    }

    /// The latest committed records, unpinned (``Store/readLatest(_:)``).
    func latestView() throws -> Snapshot {
        try checkOpen()
        return Snapshot(records: commits.published.withLock { $0.records }, engine: self, limits: configuration.limits, pin: nil)
    }

    /// A snapshot pinned at the time it is taken (``Store/makeSnapshot()``).
    func makeSnapshot() throws -> Snapshot {
        try checkOpen()
        // Under the core lock, where commits take their time and apply: a commit that unreferences
        // a blob this snapshot sees either applied before (and is pending in `horizon`, or published
        // and so not seen) or takes its time after `now`. Either way collection spares the blob.
        return core.withLock { _ in
            let now = nowSeconds
            return commits.published.withLock { published in
                // The pin is registered under the same lock, so collection sees it or sees the records it read.
                let pin = snapshots.pin(at: min(now, published.horizon ?? now))
                return Snapshot(records: published.records, engine: self, limits: configuration.limits, pin: pin)
            }
        }
    }

    /// ``Store/write(_:)``; a commit may trigger a background checkpoint.
    func write<T>(_ body: (inout Transaction) throws -> T) throws -> T {
        try checkOpen()
        let started = ContinuousClock.now
        let (result, committed) = try commits.write(body)
        if committed {
            scheduleCheckpointIfNeeded()
            noteCommit(since: started)
        }
        return result
    }

    /// ``write(_:)`` with the wait for durability left to the leader of the covering batch, which calls
    /// back on its own thread: the async twin's thread goes back to its pool at once.
    func writeDeferringAcknowledgment<T: Sendable>(_ body: (inout Transaction) throws -> T) throws -> PendingResult<T> {
        try checkOpen()
        let started = ContinuousClock.now
        let written = try commits.writeWithoutFlushing(body)
        return acknowledgment(of: written, since: started) { lead in lead() }
    }

    /// ``writeDeferringAcknowledgment(_:)`` on the calling task, if no transaction is running (nil,
    /// `body` not run, otherwise); a batch that must be led for it is led by `leader`.
    func writeIfUncontended<T: Sendable>(
        _ body: (inout Transaction) throws -> T, leader: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) throws -> PendingResult<T>? {
        try checkOpen()
        let started = ContinuousClock.now
        guard let written = try commits.writeWithoutFlushingIfUncontended(body) else { return nil }
        return acknowledgment(of: written, since: started, leader: leader)
    }

    /// The result of a written transaction, due once its flush is done; counts the commit then.
    private func acknowledgment<T: Sendable>(
        of written: (result: T, committed: Bool, flushTo: UInt64), since started: ContinuousClock.Instant,
        leader: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) -> PendingResult<T> {
        PendingResult(written.result) { [self] due in
            commits.whenFlushed(upTo: written.flushTo, leader: leader) { [self] failure in
                if failure == nil, written.committed {
                    scheduleCheckpointIfNeeded()
                    noteCommit(since: started)
                }
                due(failure)
            }
        }
    }
}
