import ContentStore
import Foundation
import Synchronization

/// Until when each of this instance's leases is known to hold, on the local monotonic clock
/// (Docs/cluster.md §6.2).
///
/// Owns one invariant: a lease counts as held only while the database certainly still has it
/// unexpired. A deadline runs from when the statement that set `expires_at` was *sent* (the
/// server's `now()` is later), and a renewal extends a lease only if its answer came before the
/// lease's deadline; a lease that lapsed stays lapsed even when a later renewal updates its row,
/// because the collector may already have deleted what it pinned.
final class LeaseClock: Sendable {
    /// How long a lease lives past its last renewal.
    let life: Duration
    private let deadlines = Mutex<[UUID: ContinuousClock.Instant]>([:])

    init(life: Duration) {
        self.life = life
    }

    /// ``life`` in seconds, as `make_interval(secs => …)` takes it.
    var lifeSeconds: Double {
        Double(life.components.seconds) + Double(life.components.attoseconds) / 1e18
    }

    /// The lease `id`, whose INSERT was sent at `sentAt`, now exists.
    func taken(_ id: UUID, sentAt: ContinuousClock.Instant) {
        deadlines.withLock { $0[id] = sentAt + life }
    }

    /// The lease `id` ended with its operation.
    func ended(_ id: UUID) {
        _ = deadlines.withLock { $0.removeValue(forKey: id) }
    }

    /// The leases a renewal about to be sent covers: those whose rows exist now.
    func current() -> [UUID] {
        deadlines.withLock { Array($0.keys) }
    }

    /// A renewal of `leases` sent at `sentAt` was answered now: each that had not lapsed by now
    /// holds until `sentAt + life`.
    func renewed(_ leases: [UUID], sentAt: ContinuousClock.Instant) {
        let answered = ContinuousClock.now
        deadlines.withLock { deadlines in
            for id in leases {
                guard let deadline = deadlines[id], answered < deadline else { continue }
                deadlines[id] = max(deadline, sentAt + life)
            }
        }
    }

    /// Throws `unavailable` when the lease `id` may have expired in the database.
    func checkHeld(_ id: UUID, what: String, database: String) throws {
        let deadline = deadlines.withLock { $0[id] }
        guard let deadline, ContinuousClock.now < deadline else {
            throw StoreError(code: .unavailable,
                             message: "the lease of \(what) \(id) lapsed: this instance could not renew it with PostgreSQL at \(database) "
                                 + "within \(life), so what it pinned may have been collected; take a new one")
        }
    }
}
