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
}
