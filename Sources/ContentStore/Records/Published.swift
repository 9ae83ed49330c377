/// The records readers see, and the commits applied but not yet durable (so not yet visible).
///
/// Collection must spare a blob that a reader may still see referenced. A reader sees the published
/// records, which lag the applied state by the commits in `pending`; a blob unreferenced by one of
/// those is still referenced in what readers see. ``horizon`` folds that into one time.
///
/// The records are kept as of the end of each batch the log takes (``taken(_:upTo:)``), not after
/// every commit: a kept version shares its nodes with the live map, so the next commit copies the path
/// it changes, and keeping one version per batch instead of one per commit spares most of those copies
/// when many writers share a sync. Every commit ends up in a batch, so once its batch is durable a
/// version covering it is here.
struct Published: Sendable {
    private(set) var lsn: UInt64 = 0
    private(set) var records: SortedMap<String, Record>
    /// Applied, not yet published commits, in LSN order.
    private var pending: [(lsn: UInt64, time: UInt32)] = []
    /// The records as of the end of each batch taken and not yet published, in LSN order.
    private var versions: [(lsn: UInt64, records: SortedMap<String, Record>)] = []

    init(records: SortedMap<String, Record>) { self.records = records }

    mutating func applied(lsn: UInt64, time: UInt32) { pending.append((lsn, time)) }

    /// Notes the records as of `lsn`, where a batch the log took ends.
    mutating func taken(_ records: SortedMap<String, Record>, upTo lsn: UInt64) {
        guard lsn > max(self.lsn, versions.last?.lsn ?? 0) else { return }
        versions.append((lsn, records))
    }

    /// Publishes the newest version at or before `lsn`, which the caller knows to be committed
    /// (durable, or written with ``Store/Durability/none``). Returns the published LSN, and the
    /// versions it replaced, for the caller to drop outside the lock: freeing the nodes only they
    /// hold is most of the cost of publishing.
    mutating func publish(upTo lsn: UInt64) -> (lsn: UInt64, replaced: [SortedMap<String, Record>]) {
        guard let newest = versions.lastIndex(where: { $0.lsn <= lsn }) else { return (self.lsn, []) }
        var replaced = [records]
        replaced.append(contentsOf: versions[..<newest].lazy.map(\.records))
        self.lsn = versions[newest].lsn
        records = versions[newest].records
        versions.removeFirst(newest + 1)
        pending.removeAll { $0.lsn <= self.lsn }
        return (self.lsn, replaced)
    }

    /// A blob unreferenced since strictly before this time is unreferenced in the published records.
    var horizon: UInt32? { pending.first?.time }
}
