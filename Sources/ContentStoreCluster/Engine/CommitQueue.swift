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
///   committed by one of them (the leader) in one SERIALIZABLE transaction: one WAL flush for all.
///   Leadership passes to the first waiter when a group ends, so no writer serves others forever.
/// - No lost update: a member commits only if every read its body made still holds in that
///   transaction and it read nothing an earlier member of the group wrote; otherwise it conflicts
///   and its body runs again. SERIALIZABLE catches what validation cannot (write skew across
///   instances: 40001), and the whole group is then retried.
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
    }

    private let state = Mutex(State())
    /// Members in one group at most.
    static let groupLimit = 64

    /// Queues `member` and waits until its group committed (or it conflicted, or failed).
    func submit(_ member: Member, engine: ClusterEngine) throws -> Outcome {
        let leads = state.withLock { state in
            state.waiting.append(member)
            defer { state.leading = true }
            return !state.leading
        }
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
        let group = state.withLock { state in
            let group = Array(state.waiting.prefix(Self.groupLimit))
            state.waiting.removeFirst(group.count)
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
}

extension ClusterEngine {
    /// Commits `group`, retrying it whole on a serialization failure or deadlock, and resolving an
    /// unknown outcome (§5.4).
    func commit(_ group: [CommitQueue.Member]) async throws -> [CommitQueue.Outcome] {
        var attempt = 0
        while true {
            let commitSent = CommitSent()
            do {
                if let outcomes = try await database.run("commit", { try await self.commitOnce(group, on: $0, commitSent: commitSent) }) {
                    return outcomes
                }
                attempt += 1
                try await Task.sleep(for: .milliseconds(Int64.random(in: 1 ... Int64(min(200, 5 * attempt)))))
            } catch let error as StoreError where error.code == .unavailable && commitSent.value.load(ordering: .relaxed) {
                return try await resolve(group, after: error)
            }
        }
    }

    /// What became of each member whose COMMIT got no answer: the token says.
    private func resolve(_ group: [CommitQueue.Member], after failure: StoreError) async throws -> [CommitQueue.Outcome] {
        let deadline = ContinuousClock.now + cluster.commitResolutionTimeout
        var outcomes: [CommitQueue.Outcome] = []
        for member in group {
            while true {
                do {
                    switch try await database.resolveCommit(token: member.token) {
                    case .committed: outcomes.append(.committed)
                    case .notCommitted: outcomes.append(.conflict)
                    }
                    break
                } catch let error as StoreError where error.code == .unavailable && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(500))
                } catch {
                    throw StoreError(code: .unavailable,
                                     message: "the outcome of commit \(member.token) is unknown (it was applied at most once): \(failure.message)",
                                     cause: error)
                }
            }
        }
        logger.info("resolved commits of unknown outcome", metadata: ["tokens": "\(group.map(\.token))"])
        return outcomes
    }

    /// One attempt at the group transaction; nil when it must be retried (40001, 40P01).
    private func commitOnce(_ group: [CommitQueue.Member], on connection: PostgresConnection,
                            commitSent: CommitSent) async throws -> [CommitQueue.Outcome]? {
        let logger = logger
        try await connection.query("BEGIN ISOLATION LEVEL SERIALIZABLE", logger: logger)
        do {
            if configuration.durability == .none {
                try await connection.query("SET LOCAL synchronous_commit = off", logger: logger)
            }
            var written = Set<String>()
            var deltas: [Digest: Int64] = [:]
            var outcomes: [CommitQueue.Outcome] = []
            for member in group {
                guard !member.reads.touches(written), try await validate(member.reads, on: connection) else {
                    outcomes.append(.conflict)
                    continue
                }
                let memberDeltas = try await referenceDeltas(member.changes, on: connection)
                if let missing = try await firstMissingBlob(member, deltas: memberDeltas, on: connection) {
                    outcomes.append(missing)
                    continue
                }
                try await apply(member, on: connection)
                for (digest, delta) in memberDeltas { deltas[digest, default: 0] += delta }
                written.formUnion(member.changes.map(\.key))
                outcomes.append(.committed)
            }
            guard try await applyCounts(deltas, on: connection) else {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                return nil
            }
            commitSent.value.store(true, ordering: .relaxed)
            try await connection.query("COMMIT", logger: logger)
            return outcomes
        } catch let error as PSQLError where ["40001", "40P01"].contains(error.serverInfo?[.sqlState]) {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            return nil
        } catch {
            if !commitSent.value.load(ordering: .relaxed) { _ = try? await connection.query("ROLLBACK", logger: logger) }
            throw error
        }
    }

    /// Whether every read in `reads` still holds.
    private func validate(_ reads: ReadSet, on connection: PostgresConnection) async throws -> Bool {
        if !reads.points.isEmpty {
            var current: [String: Int64] = [:]
            let rows = try await connection.query(
                "SELECT key, version FROM contentstore.records WHERE key = ANY(\(Array(reads.points.keys)))", logger: logger)
            for try await (key, version) in rows.decode((String, Int64).self) { current[key] = version }
            for (key, seen) in reads.points where current[key] != seen { return false }
        }
        for (prefix, seen) in reads.prefixes {
            guard try await Self.versionedKeys(withPrefix: prefix, on: connection, logger: logger) == seen else { return false }
        }
        return true
    }

    /// Per digest: references the member's new records hold minus those their current rows hold.
    private func referenceDeltas(_ changes: [(key: String, record: Record?)], on connection: PostgresConnection) async throws -> [Digest: Int64] {
        var deltas: [Digest: Int64] = [:]
        let rows = try await connection.query(
            "SELECT key, refs FROM contentstore.records WHERE key = ANY(\(changes.map(\.key)))", logger: logger)
        for try await (key, refs) in rows.decode((String, ByteBuffer).self) {
            for digest in try Digest.list(refs, key: key) { deltas[digest, default: 0] -= 1 }
        }
        for change in changes {
            for digest in change.record?.references ?? [] { deltas[digest, default: 0] += 1 }
        }
        return deltas.filter { $0.value != 0 }
    }

    /// `missingBlob` for the first digest the member adds a reference to that has no `blobs` row.
    private func firstMissingBlob(_ member: CommitQueue.Member, deltas: [Digest: Int64],
                                  on connection: PostgresConnection) async throws -> CommitQueue.Outcome? {
        let added = deltas.filter { $0.value > 0 }.map(\.key)
        guard !added.isEmpty else { return nil }
        var present = Set<Digest>()
        let rows = try await connection.query(
            "SELECT digest FROM contentstore.blobs WHERE digest = ANY(\(added.map(\.buffer)))", logger: logger)
        for try await digest in rows.decode(ByteBuffer.self) { present.insert(try Digest(buffer: digest, what: "contentstore.blobs")) }
        for change in member.changes {
            if let digest = change.record?.references.first(where: { deltas[$0, default: 0] > 0 && !present.contains($0) }) {
                return .missingBlob(digest, key: change.key)
            }
        }
        return nil
    }

    private func apply(_ member: CommitQueue.Member, on connection: PostgresConnection) async throws {
        let sequenceRows = try await connection.query("SELECT nextval('contentstore.commit_sequence')", logger: logger)
        var sequence: Int64 = 0
        for try await value in sequenceRows.decode(Int64.self) { sequence = value }
        for change in member.changes {
            if let record = change.record {
                try await connection.query("""
                    INSERT INTO contentstore.records (key, value, refs, version) \
                    VALUES (\(change.key), \(ByteBuffer(bytes: record.value)), \(Digest.column(record.references)), \(sequence)) \
                    ON CONFLICT (key) DO UPDATE SET value = excluded.value, refs = excluded.refs, version = excluded.version
                    """, logger: logger)
            } else {
                try await connection.query("DELETE FROM contentstore.records WHERE key = \(change.key)", logger: logger)
            }
        }
        try await connection.query(
            "INSERT INTO contentstore.commit_tokens (token, committed, sequence) VALUES (\(member.token), true, \(sequence))", logger: logger)
    }

    /// Applies the group's count changes, digests in order (two instances lock rows in one order).
    /// False when a row is gone (collected since the check): the group is retried.
    private func applyCounts(_ deltas: [Digest: Int64], on connection: PostgresConnection) async throws -> Bool {
        let changed = deltas.filter { $0.value != 0 }.sorted { $0.key < $1.key }
        guard !changed.isEmpty else { return true }
        let rows = try await connection.query("""
            UPDATE contentstore.blobs SET ref_count = ref_count + d.delta, \
            zero_since = CASE WHEN ref_count + d.delta = 0 THEN now() ELSE NULL END \
            FROM unnest(\(changed.map(\.key.buffer))::bytea[], \(changed.map(\.value))::bigint[]) AS d(digest, delta) \
            WHERE blobs.digest = d.digest RETURNING 1
            """, logger: logger)
        var updated = 0
        for try await _ in rows.decode(Int32.self) { updated += 1 }
        return updated == changed.count
    }
}

/// Whether an attempt sent COMMIT: past that point a lost connection leaves the outcome unknown.
final class CommitSent: Sendable {
    let value = Atomic<Bool>(false)
}
