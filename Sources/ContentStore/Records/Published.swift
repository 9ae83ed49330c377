/// The records readers see, and the commits applied but not yet durable (so not yet visible).
///
/// Collection must spare a blob that a reader may still see referenced. A reader sees the published
/// records, which lag the applied state by the commits in `pending`; a blob unreferenced by one of
/// those is still referenced in what readers see. ``horizon`` folds that into one time.
struct Published: Sendable {
    private(set) var lsn: UInt64 = 0
    private(set) var records: SortedMap<String, Record>
    /// Applied, not yet published commits, in LSN order.
    private var pending: [(lsn: UInt64, time: UInt32)] = []

    init(records: SortedMap<String, Record>) { self.records = records }

    mutating func applied(lsn: UInt64, time: UInt32) { pending.append((lsn, time)) }

    /// Publishes `records` as of `lsn` unless something newer is already published.
    mutating func publish(_ records: SortedMap<String, Record>, lsn: UInt64) {
        guard lsn > self.lsn else { return }
        self.lsn = lsn
        self.records = records
        pending.removeAll { $0.lsn <= lsn }
    }

    /// A blob unreferenced since strictly before this time is unreferenced in the published records.
    var horizon: UInt32? { pending.first?.time }
}
