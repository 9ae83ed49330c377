import Foundation

extension Store {
    /// The latest committed record under `key`, or nil.
    public func record(forKey key: String) throws -> Record? {
        try checkOpen()
        try Store.validate(key: key, limits: configuration.limits)
        return commits.published.withLock { $0.records[key] }
    }

    /// The committed keys that start with `prefix`, in ascending order.
    public func keys(withPrefix prefix: String) throws -> [String] {
        try checkOpen()
        return commits.published.withLock { $0.records }.keys(withPrefix: prefix)
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
        let latest = Snapshot(records: commits.published.withLock { $0.records }, store: self, pin: nil)
        seams.afterTakingUnpinnedView?(self)
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
            return commits.published.withLock { published in
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
        let (result, committed) = try commits.write(body)
        if committed { scheduleCheckpointIfNeeded() }
        return result
    }
}
