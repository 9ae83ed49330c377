/// The records readers see, and the commits applied but not yet durable (so not yet visible).
///
/// Collection must spare a blob that a reader may still see referenced. A reader sees the published
/// records, which lag the applied state by the commits in `pending`; a blob unreferenced by one of
/// those is still referenced in what readers see. ``horizon`` folds that into one time.
struct Published: Sendable {
    private(set) var lsn: UInt64 = 0
    private(set) var records: SortedMap<String, Record>
    /// Applied, not yet published commits with the records after each, in LSN order.
    private var pending: [(lsn: UInt64, time: UInt32, records: SortedMap<String, Record>)] = []

    init(records: SortedMap<String, Record>) { self.records = records }

    /// Notes a commit applied (and logged at `lsn`), leaving `records`.
    mutating func applied(lsn: UInt64, time: UInt32, records: SortedMap<String, Record>) { pending.append((lsn, time, records)) }

    /// Publishes the newest applied commit logged at or before `lsn`, which the caller knows to be
    /// committed (durable, or written with ``Store/Durability/none``). Returns the published LSN.
    ///
    /// The first committer of a group commit to wake publishes the whole batch, so the others find
    /// their commit published and skip the lock. A commit of the batch not noted yet (its committer
    /// is between its append and ``applied(lsn:time:records:)``) is published by its own committer,
    /// after its flush; commits are noted in LSN order, under the core lock.
    @discardableResult
    mutating func publish(upTo lsn: UInt64) -> UInt64 {
        guard let newest = pending.lastIndex(where: { $0.lsn <= lsn }) else { return self.lsn }
        self.lsn = pending[newest].lsn
        records = pending[newest].records
        pending.removeFirst(newest + 1)
        return self.lsn
    }

    /// A blob unreferenced since strictly before this time is unreferenced in the published records.
    var horizon: UInt32? { pending.first?.time }
}
