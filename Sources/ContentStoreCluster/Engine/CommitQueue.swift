import ContentStore
import Dispatch
import Foundation
import NIOCore
import PostgresNIO
import Synchronization

/// One instance's commits, grouped (Docs/cluster.md §5.2–5.4).
///
/// Owns three invariants:
/// - Group commit: writers that arrive while a group is in flight queue and form the next group,
///   committed by one of them (the leader) in one transaction: one WAL flush for all (READ
///   COMMITTED with the rows locked when every member read only keys it writes, else SERIALIZABLE).
///   A new leader first waits, at most ``gatherTimeout``, for as many writers as the last group
///   held. Leadership passes to the first waiter when a group ends, so no writer serves others forever.
/// - No lost update: a member commits only if every read its body made still holds in that
///   transaction and it read nothing an earlier member of the group wrote; otherwise it conflicts
///   and its body runs again. Row locks, or SERIALIZABLE, catch what validation cannot (write skew across
///   instances: 40001), and the whole group is then retried, a bounded number of times
///   (``ClusterEngine/commitAttemptLimit``).
/// - Exactly once: a commit whose outcome was lost is resolved through its token before the writer
///   hears anything (``ClusterDatabase/resolveCommit(token:)``).
/// Counts change in the same transaction as the records, from the records' reference diffs.
final class CommitQueue: Sendable {
    /// What became of a member.
    enum Outcome: Sendable {
        case committed
        case conflict
        case missingBlob(Digest, key: String)
        case failed(any Error)
        /// Not an outcome: the member now leads the next group.
        case lead
    }

    /// One `write` waiting to commit.
    final class Member: Sendable {
        let token = UUID()
        /// When it was queued: the group's debug line says how long its oldest member waited.
        let queued = ContinuousClock.now
        let reads: ReadSet
        let changes: [(key: String, record: Record?)]
        private let outcome = Mutex<Outcome?>(nil)
        private let signal = DispatchSemaphore(value: 0)

        init(reads: ReadSet, changes: [(key: String, record: Record?)]) {
            self.reads = reads
            self.changes = changes
        }

        func finish(_ outcome: Outcome) {
            self.outcome.withLock { $0 = outcome }
            signal.signal()
        }

        func next() -> Outcome {
            signal.wait()
            return outcome.withLock { $0.take()! }
        }
    }

    private struct State {
        var waiting: [Member] = []
        var leading = false
        /// A leader is waiting for the writers of the last group to queue again.
        var gathering = false
        var lastGroupSize = 0
    }

    private let state = Mutex(State())
    /// Signalled for each writer that queues while a leader gathers.
    private let arrivals = DispatchSemaphore(value: 0)
    /// Members in one group at most.
    static let groupLimit = 64
    /// How long a leader waits for the writers of the last group to queue again. The writers a
    /// group releases each make one read (a round trip) before they queue: without the wait, the
    /// first to return commits alone and the rest form the next group, halving the groups.
    static let gatherTimeout: DispatchTimeInterval = .milliseconds(1)

    /// Queues `member` and waits until its group committed (or it conflicted, or failed).
    func submit(_ member: Member, engine: ClusterEngine) throws -> Outcome {
        let (leads, gathering) = state.withLock { state in
            state.waiting.append(member)
            defer { state.leading = true }
            return (!state.leading, state.gathering)
        }
        if gathering { arrivals.signal() }
        if leads { member.finish(.lead) }
        while true {
            switch member.next() {
            case .lead: lead(engine)
            case .failed(let error): throw error
            case let outcome: return outcome
            }
        }
    }

    private func lead(_ engine: ClusterEngine) {
        gather()
        let group = state.withLock { state in
            let group = Array(state.waiting.prefix(Self.groupLimit))
            state.waiting.removeFirst(group.count)
            state.lastGroupSize = group.count
            return group
        }
        let outcomes: [Outcome]
        do {
            outcomes = try engine.wait { try await engine.commit(group) }
        } catch {
            outcomes = group.map { _ in .failed(error) }
        }
        let next = state.withLock { state -> Member? in
            if let first = state.waiting.first { return first }
            state.leading = false
            return nil
        }
        for (member, outcome) in zip(group, outcomes) { member.finish(outcome) }
        next?.finish(.lead)
    }

    /// Waits until as many writers queue as the last group held, at most ``gatherTimeout``; never
    /// for a writer alone (a single writer's commits are not delayed).
    private func gather() {
        let deadline = DispatchTime.now() + Self.gatherTimeout
        while state.withLock({ state in
            state.gathering = state.waiting.count < state.lastGroupSize
            return state.gathering
        }) {
            if arrivals.wait(timeout: deadline) == .timedOut { break }
        }
        state.withLock { $0.gathering = false }
    }
}

/// Whether an attempt sent COMMIT: past that point a lost connection leaves the outcome unknown.
final class CommitSent: Sendable {
    let value = Atomic<Bool>(false)
}
