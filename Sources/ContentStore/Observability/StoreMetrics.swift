import CoreMetrics
import Foundation
import Synchronization

/// The store's metrics (swift-metrics), made once at open from ``Store/Configuration/metricsFactory``
/// (nil: the process's bootstrapped `MetricsSystem.factory`). Docs/operations.md lists each with what
/// an operator should do about it.
///
/// Invariant owned here: each event is counted once, by the one call the engine makes for it —
/// one commit per `write` that committed, one put per `put` call (deduplicated ones too) with its
/// logical bytes, one get per `get` call, one collection per `collectGarbage` that was not a dry run.
/// The gauges are set from the state at open, after every collection, checkpoint and `statistics()`,
/// and after commits and puts at most once per ``gaugeInterval`` (reading them costs the core lock).
final class StoreMetrics: Sendable {
    /// The labels, as DESIGN names them.
    enum Label {
        static let commits = "contentstore_commits_total"
        static let commitDuration = "contentstore_commit_duration"
        static let puts = "contentstore_puts_total"
        static let putBytes = "contentstore_put_bytes_total"
        static let gets = "contentstore_gets_total"
        static let readCacheHits = "contentstore_read_cache_hits_total"
        static let walSyncs = "contentstore_wal_syncs_total"
        static let gcRuns = "contentstore_gc_runs_total"
        static let gcBlobsRemoved = "contentstore_gc_blobs_removed_total"
        static let gcBytesFreed = "contentstore_gc_bytes_freed_total"
        static let blobs = "contentstore_blobs"
        static let records = "contentstore_records"
        static let storedBytes = "contentstore_stored_bytes"
    }

    /// Commits and puts refresh the gauges at most this often.
    static let gaugeInterval: Duration = .seconds(1)
    private static let gaugeIntervalNanoseconds = Int64(gaugeInterval / .nanoseconds(1))

    private let commits: Counter
    private let commitDuration: CoreMetrics.Timer
    private let puts: Counter
    private let putBytes: Counter
    private let gets: Counter
    private let readCacheHits: Counter
    private let walSyncs: Counter
    private let gcRuns: Counter
    private let gcBlobsRemoved: Counter
    private let gcBytesFreed: Counter
    private let blobs: Gauge
    private let records: Gauge
    private let storedBytes: Gauge
    /// Nanoseconds (on the monotonic clock, since `created`) of the last gauge refresh.
    private let lastGaugeRefresh = Atomic<Int64>(Int64.min)
    private let created = DispatchTime.now().uptimeNanoseconds

    init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        commits = Counter(label: Label.commits, factory: factory)
        commitDuration = CoreMetrics.Timer(label: Label.commitDuration, dimensions: [], factory: factory)
        puts = Counter(label: Label.puts, factory: factory)
        putBytes = Counter(label: Label.putBytes, factory: factory)
        gets = Counter(label: Label.gets, factory: factory)
        readCacheHits = Counter(label: Label.readCacheHits, factory: factory)
        walSyncs = Counter(label: Label.walSyncs, factory: factory)
        gcRuns = Counter(label: Label.gcRuns, factory: factory)
        gcBlobsRemoved = Counter(label: Label.gcBlobsRemoved, factory: factory)
        gcBytesFreed = Counter(label: Label.gcBytesFreed, factory: factory)
        blobs = Gauge(label: Label.blobs, factory: factory)
        records = Gauge(label: Label.records, factory: factory)
        storedBytes = Gauge(label: Label.storedBytes, factory: factory)
    }

    func committed(since started: ContinuousClock.Instant) {
        commits.increment()
        commitDuration.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
    }

    func put(bytes: UInt64) {
        puts.increment()
        putBytes.increment(by: Int64(clamping: bytes))
    }

    func got() { gets.increment() }

    func readCacheHit() { readCacheHits.increment() }

    func walSynced() { walSyncs.increment() }

    func collected(_ report: GarbageCollectionReport) {
        guard !report.dryRun else { return }
        gcRuns.increment()
        gcBlobsRemoved.increment(by: Int64(report.blobsRemoved))
        gcBytesFreed.increment(by: Int64(clamping: report.bytesFreed))
    }

    func record(blobCount: Int, recordCount: Int, storedBytes bytes: UInt64) {
        blobs.record(blobCount)
        records.record(recordCount)
        storedBytes.record(Int64(clamping: bytes))
    }

    /// Whether the throttled refresh after a commit or put is due (and claims it).
    func gaugeRefreshIsDue() -> Bool {
        // Integer nanoseconds: `Duration`'s arithmetic and division (128-bit) were a share of every put.
        let now = Int64(DispatchTime.now().uptimeNanoseconds - created)
        let last = lastGaugeRefresh.load(ordering: .relaxed)
        guard last == Int64.min || now - last >= Self.gaugeIntervalNanoseconds else { return false }
        return lastGaugeRefresh.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
    }
}
