// Counts the store's WAL syncs through its metrics factory, so a run reports how many commits each
// sync covered (the group size) without `strace` slowing every system call.
import CoreMetrics
import Synchronization

/// A metrics factory that counts `contentstore_wal_syncs_total` and ignores every other metric.
final class WALSyncCounter: MetricsFactory, Sendable {
    private let count = Counter()

    /// WAL syncs so far.
    var syncs: Int64 { count.total.load(ordering: .relaxed) }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        label == "contentstore_wal_syncs_total" ? count : Ignored()
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { Ignored() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Ignored() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Ignored() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private final class Counter: CounterHandler, Sendable {
        let total = Atomic<Int64>(0)
        func increment(by amount: Int64) { total.add(amount, ordering: .relaxed) }
        func reset() { total.store(0, ordering: .relaxed) }
    }

    private final class Ignored: CounterHandler, FloatingPointCounterHandler, RecorderHandler, TimerHandler, Sendable {
        func increment(by amount: Int64) {}
        func increment(by amount: Double) {}
        func reset() {}
        func record(_ value: Int64) {}
        func record(_ value: Double) {}
        func recordNanoseconds(_ duration: Int64) {}
    }
}
