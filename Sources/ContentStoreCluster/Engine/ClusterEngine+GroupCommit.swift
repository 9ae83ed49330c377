import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// The group commit transaction (Docs/cluster.md §5.2).
///
/// Owns "a group costs a fixed number of round trips, whatever its size": BEGIN, one read of every
/// row the group's members read or write (plus one per prefix read, and one for the blobs they add
/// references to), one statement writing every record, token and count, and COMMIT. Each member's
/// validation, count deltas and `missingBlob` check run in memory, in queue order, over those rows
/// and the writes of the members before it — exactly what running them one by one inside the
/// transaction would see, because nothing but this group writes inside it.
///
/// A group whose members read only keys they also write (blind `setRecord`/`removeRecord`, or
/// read-modify-write of the written keys) runs at READ COMMITTED with its rows locked (§5.2.1):
/// `FOR UPDATE` on every present row in key order, a plain INSERT for every absent one (a
/// concurrent insert of the same key fails it with 23505), `FOR KEY SHARE` on the blob rows it adds
/// references to. A group with any other read stays SERIALIZABLE. BEGIN is queued behind the read
/// and COMMIT behind the write on the connection (postgres-nio sends each as soon as the one before
/// it is answered, without a trip back to this task); the write makes its own transaction fail when
/// a count row is gone, so a queued COMMIT can never apply a wrong plan.
fileprivate extension Duration {
    /// Whole microseconds, for log lines.
    var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}

extension ClusterEngine {
    /// Serialization failures or deadlocks in a row before a group gives up with `unavailable`.
    static let commitAttemptLimit = 64

    /// Commits `group`, retrying it whole on a serialization failure or deadlock (at most
    /// ``commitAttemptLimit`` attempts, with growing random backoff), and resolving an unknown
    /// outcome (§5.4).
    func commit(_ group: [CommitQueue.Member]) async throws -> [CommitQueue.Outcome] {
        let started = ContinuousClock.now
        var attempt = 1
        while true {
            let commitSent = CommitSent()
            do {
                let result = try await database.run("commit") { try await self.commitOnce(group, on: $0, commitSent: commitSent) }
                switch result {
                case .done(let outcomes, let statements, let isolation):
                    logger.debug("committed a group", metadata: [
                        "isolation": "\(isolation)",
                        "members": "\(group.count)", "committed": "\(outcomes.count(where: { if case .committed = $0 { true } else { false } }))",
                        "statements": "\(statements)", "attempts": "\(attempt)",
                        "queuedMicros": "\(group.map { (started - $0.queued).microseconds }.max() ?? 0)",
                        "micros": "\((ContinuousClock.now - started).microseconds)"])
                    return outcomes
                case .retry(let sqlState, let cause) where attempt >= Self.commitAttemptLimit:
                    throw StoreError(code: .unavailable,
                                     message: "PostgreSQL at \(database.endpoint) aborted a group commit of \(group.count) writes \(attempt) times in a row (last: \(sqlState.map { "SQLSTATE \($0)" } ?? "a blob row collected since the check")); nothing of it was applied",
                                     cause: cause)
                case .retry(let sqlState, _):
                    logger.debug("group commit retried", metadata: ["sqlstate": "\(sqlState ?? "none")", "attempt": "\(attempt)"])
                    attempt += 1
                    try await Task.sleep(for: .milliseconds(Int64.random(in: 1 ... Int64(min(200, 5 * attempt)))))
                }
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

    /// One attempt's result: the members' outcomes and the statements it took, or a retry.
    private enum Attempt: Sendable {
        case done([CommitQueue.Outcome], statements: Int, isolation: String)
        /// A serialization failure, deadlock or collected blob row: the group runs again.
        case retry(sqlState: String?, cause: (any Error)?)
    }

    /// One attempt at the group transaction.
    private func commitOnce(_ group: [CommitQueue.Member], on connection: PostgresConnection,
                            commitSent: CommitSent) async throws -> Attempt {
        let logger = logger
        let locking = group.allSatisfy(\.readsOnlyItsWrites)
        var statements = 1
        // Queued, not awaited: the read below goes out as soon as BEGIN is answered.
        let begun: EventLoopFuture<PostgresQueryResult> = connection.query(
            locking ? "BEGIN ISOLATION LEVEL READ COMMITTED" : "BEGIN ISOLATION LEVEL SERIALIZABLE", logger: logger)
        var configured: EventLoopFuture<PostgresQueryResult>?
        if configuration.durability == .none {
            statements += 1
            configured = connection.query("SET LOCAL synchronous_commit = off", logger: logger)
        }
        do {
            let rows = try await GroupRows.read(for: group, locking: locking, on: connection, logger: logger)
            _ = try await begun.get()
            _ = try await configured?.get()
            statements += rows.statements
            let plan = GroupPlan(group, rows: rows)
            var written: EventLoopFuture<PostgresQueryResult>?
            if !plan.tokens.isEmpty {
                statements += 1
                written = write(plan, rows: rows, on: connection)
            }
            statements += 1
            commitSent.value.store(true, ordering: .relaxed)
            let committed: EventLoopFuture<PostgresQueryResult> = connection.query("COMMIT", logger: logger)
            do {
                _ = try await written?.get()
            } catch {
                // A failed write aborted the transaction: the queued COMMIT only ends it.
                _ = try? await committed.get()
                if let error = error as? PSQLError, let state = error.serverInfo?[.sqlState], Self.retriedStates.contains(state) {
                    return .retry(sqlState: state, cause: PostgresFailure(error))
                }
                throw error
            }
            _ = try await committed.get()
            return .done(plan.outcomes, statements: statements, isolation: locking ? "read committed" : "serializable")
        } catch let error as PSQLError where Self.retriedStates.contains(error.serverInfo?[.sqlState] ?? "") {
            // Also COMMIT's own answer (SERIALIZABLE checks at commit): the server said it failed.
            if !commitSent.value.load(ordering: .relaxed) { _ = try? await connection.query("ROLLBACK", logger: logger) }
            return .retry(sqlState: error.serverInfo?[.sqlState], cause: PostgresFailure(error))
        } catch {
            if !commitSent.value.load(ordering: .relaxed) { _ = try? await connection.query("ROLLBACK", logger: logger) }
            throw error
        }
    }

    /// SQLSTATEs after which the whole group runs again: serialization failure, deadlock, a key
    /// another transaction inserted since the read (unique violation), and the write's own
    /// "a count row is gone" (the NULL token it inserts then: not-null violation).
    static let retriedStates: Set<String> = ["40001", "40P01", "23505", "23502"]

    /// Every record, token and count change of the group in one statement (one sequence value for
    /// the group: a key's version still changes with every commit that writes it), queued on the
    /// connection. Keys and digests sorted, so two instances' groups lock rows in one order. A key
    /// that had no row when read is INSERTed without ON CONFLICT: if another transaction inserted
    /// it since, the statement fails (23505) instead of overwriting a row whose references the plan
    /// did not count. When a count row is gone the statement inserts a NULL token (23502), so the
    /// transaction fails and the COMMIT queued behind it cannot apply the group.
    private func write(_ plan: GroupPlan, rows: GroupRows, on connection: PostgresConnection) -> EventLoopFuture<PostgresQueryResult> {
        let stored = plan.finalRecords.compactMap { key, record in record.map { (key, $0) } }.sorted { $0.0 < $1.0 }
        let inserts = stored.filter { rows.records[$0.0] == nil }
        let updates = stored.filter { rows.records[$0.0] != nil }
        let deletes = plan.finalRecords.filter { $0.value == nil && rows.records[$0.key] != nil }.map(\.key).sorted()
        let counts = plan.deltas.filter { $0.value != 0 }.sorted { $0.key < $1.key }
        return connection.query("""
            WITH seq AS MATERIALIZED (SELECT nextval('contentstore.commit_sequence') AS v), \
            inserted AS (INSERT INTO contentstore.records (key, value, refs, version) \
              SELECT u.key, u.value, u.refs, seq.v FROM unnest(\(inserts.map(\.0))::text[], \(inserts.map { ByteBuffer(bytes: $0.1.value) })::bytea[], \
                \(inserts.map { Digest.column($0.1.references) })::bytea[]) AS u(key, value, refs), seq RETURNING 1), \
            updated AS (UPDATE contentstore.records r SET value = u.value, refs = u.refs, version = seq.v \
              FROM unnest(\(updates.map(\.0))::text[], \(updates.map { ByteBuffer(bytes: $0.1.value) })::bytea[], \
                \(updates.map { Digest.column($0.1.references) })::bytea[]) AS u(key, value, refs), seq WHERE r.key = u.key RETURNING 1), \
            deleted AS (DELETE FROM contentstore.records WHERE key = ANY(\(deletes)::text[]) RETURNING 1), \
            tokens AS (INSERT INTO contentstore.commit_tokens (token, committed, sequence) \
              SELECT t.token, true, seq.v FROM unnest(\(plan.tokens)::uuid[]) AS t(token), seq RETURNING 1), \
            counted AS (UPDATE contentstore.blobs SET ref_count = ref_count + d.delta, \
              zero_since = CASE WHEN ref_count + d.delta = 0 THEN now() ELSE NULL END \
              FROM unnest(\(counts.map(\.key.buffer))::bytea[], \(counts.map(\.value))::bigint[]) AS d(digest, delta) \
              WHERE blobs.digest = d.digest RETURNING 1), \
            gone AS (INSERT INTO contentstore.commit_tokens (token, committed) \
              SELECT NULL, true WHERE (SELECT count(*) FROM counted) <> \(Int64(counts.count)) RETURNING 1) \
            SELECT (SELECT count(*) FROM gone)
            """, logger: logger)
    }
}

extension CommitQueue.Member {
    /// Whether every read is of a key this member writes, and none is of a prefix: the group can
    /// then run at READ COMMITTED with those rows locked (Docs/cluster.md §5.2.1).
    var readsOnlyItsWrites: Bool {
        guard reads.prefixes.isEmpty else { return false }
        let written = Set(changes.map(\.key))
        return reads.points.keys.allSatisfy(written.contains)
    }
}

/// The rows a group's members depend on, read inside the group transaction before anything is
/// written: one statement for the keys, one per prefix, one for the blobs references are added to.
struct GroupRows: Sendable {
    /// Key → (version, record) of every existing row a member read or writes.
    var records: [String: (version: Int64, record: Record)] = [:]
    var prefixes: [String: [KeyVersion]] = [:]
    /// Blobs with a row, among those a member's new records reference that the key's row did not.
    var presentBlobs = Set<Digest>()
    var statements = 0

    /// With `locking` (READ COMMITTED), present rows are locked `FOR UPDATE` in key order and the
    /// blob rows `FOR KEY SHARE` in digest order: what the read returns stays true until COMMIT.
    static func read(for group: [CommitQueue.Member], locking: Bool, on connection: PostgresConnection, logger: Logger) async throws -> GroupRows {
        var result = GroupRows()
        var keys = Set<String>()
        var prefixes = Set<String>()
        for member in group {
            keys.formUnion(member.reads.points.keys)
            keys.formUnion(member.changes.map(\.key))
            prefixes.formUnion(member.reads.prefixes.keys)
        }
        let rows = try await connection.query(locking
            ? "SELECT key, version, refs, value FROM contentstore.records WHERE key = ANY(\(keys.sorted())::text[]) ORDER BY key FOR UPDATE"
            : "SELECT key, version, refs, value FROM contentstore.records WHERE key = ANY(\(keys.sorted())::text[])", logger: logger)
        for try await (key, version, refs, value) in rows.decode((String, Int64, ByteBuffer, ByteBuffer).self) {
            result.records[key] = (version, Record(value: Data(value.readableBytesView), references: try Digest.list(refs, key: key)))
        }
        result.statements += 1
        for prefix in prefixes.sorted() {
            result.prefixes[prefix] = try await ClusterEngine.versionedKeys(withPrefix: prefix, on: connection, logger: logger)
            result.statements += 1
        }
        let added = result.addedDigests(group)
        if !added.isEmpty {
            let blobs = try await connection.query(
                "SELECT digest FROM contentstore.blobs WHERE digest = ANY(\(added.sorted().map(\.buffer))::bytea[]) ORDER BY digest FOR KEY SHARE",
                logger: logger)
            for try await digest in blobs.decode(ByteBuffer.self) {
                result.presentBlobs.insert(try Digest(buffer: digest, what: "contentstore.blobs"))
            }
            result.statements += 1
        }
        return result
    }

    /// Digests some member's new record references that the key's row does not: the only ones a
    /// count can rise for without a row already referencing them (whose blob row then exists).
    private func addedDigests(_ group: [CommitQueue.Member]) -> Set<Digest> {
        var added = Set<Digest>()
        for member in group {
            for change in member.changes {
                let old = Set(records[change.key]?.record.references ?? [])
                added.formUnion((change.record?.references ?? []).filter { !old.contains($0) })
            }
        }
        return added
    }
}

/// The group's members applied one by one in memory, in queue order, over ``GroupRows``: each
/// member's outcome, the final state of every key written, the count deltas, the committed tokens.
struct GroupPlan {
    var outcomes: [CommitQueue.Outcome] = []
    /// Key → the record the group leaves there (nil: removed). Later members overwrite earlier ones.
    var finalRecords: [String: Record?] = [:]
    var deltas: [Digest: Int64] = [:]
    var tokens: [UUID] = []

    init(_ group: [CommitQueue.Member], rows: GroupRows) {
        var current: [String: Record?] = rows.records.mapValues { Optional($0.record) }
        var written = Set<String>()
        // A digest a row referenced before the group has a blob row (its count is at least one).
        let present = rows.presentBlobs.union(rows.records.values.flatMap(\.record.references))
        for member in group {
            guard !member.reads.touches(written), Self.holds(member.reads, in: rows) else {
                outcomes.append(.conflict)
                continue
            }
            // A blind rewrite of what the key holds commits nothing (``ClusterEngine/write(_:)``).
            let changes = member.changes.filter { $0.record != current[$0.key] ?? nil }
            var memberDeltas: [Digest: Int64] = [:]
            for change in changes {
                for digest in current[change.key]??.references ?? [] { memberDeltas[digest, default: 0] -= 1 }
                for digest in change.record?.references ?? [] { memberDeltas[digest, default: 0] += 1 }
            }
            if let missing = Self.firstMissingBlob(changes, deltas: memberDeltas, present: present) {
                outcomes.append(missing)
                continue
            }
            for change in changes {
                current[change.key] = .some(change.record)
                finalRecords[change.key] = change.record
                written.insert(change.key)
            }
            for (digest, delta) in memberDeltas where delta != 0 { deltas[digest, default: 0] += delta }
            tokens.append(member.token)
            outcomes.append(.committed)
        }
    }

    /// Whether every read still holds: the member read nothing an earlier member wrote, so the
    /// rows as they were before the group are what it would see.
    private static func holds(_ reads: ReadSet, in rows: GroupRows) -> Bool {
        for (key, seen) in reads.points where rows.records[key]?.version != seen { return false }
        for (prefix, seen) in reads.prefixes where rows.prefixes[prefix] != seen { return false }
        return true
    }

    /// `missingBlob` for the first digest the member adds a reference to that has no `blobs` row.
    private static func firstMissingBlob(_ changes: [(key: String, record: Record?)], deltas: [Digest: Int64],
                                         present: Set<Digest>) -> CommitQueue.Outcome? {
        for change in changes {
            if let digest = change.record?.references.first(where: { deltas[$0, default: 0] > 0 && !present.contains($0) }) {
                return .missingBlob(digest, key: change.key)
            }
        }
        return nil
    }
}
