import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Garbage collection (Docs/cluster.md §6): one collector at a time cluster-wide, on the database's
/// clock.
///
/// Owns rule 3 for the cluster: a blob row is deleted only when its count is 0 and it became
/// garbage and was last put before the horizon (now − grace, and the start of every running
/// snapshot in any instance), re-checked under the row lock that commits and puts also take; a pack
/// object is deleted only when no row points into it and it was condemned (or orphaned) before
/// the horizon.
extension ClusterEngine {
    func collectGarbage(_ options: GarbageCollectionOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> GarbageCollectionReport {
        try checkOpen()
        let grace = options.gracePeriod ?? configuration.garbageGracePeriod
        guard grace >= .zero else { throw StoreError(code: .invalidArgument, message: "the grace period is negative") }
        let started = ContinuousClock.now
        let database = database
        var report = try wait {
            let held = try await database.hold("collect garbage")
            defer { held.release() }
            do {
                return try await self.collect(grace: grace, dryRun: options.dryRun,
                                              on: BoundedConnection(held: held, database: database, operation: "collect garbage"))
            } catch {
                throw database.storeError(error, operation: "collect garbage")
            }
        }
        report.duration = ContinuousClock.now - started
        return report
    }

    private func collect(grace: Duration, dryRun: Bool, on connection: BoundedConnection) async throws -> GarbageCollectionReport {
        let lock = ClusterSchema.AdvisoryLock.collector.rawValue
        var acquired = false
        for value in try await connection.query("SELECT pg_try_advisory_lock(\(lock))", logger: logger).decode(Bool.self) {
            acquired = value
        }
        guard acquired else {
            let holder = try await collectorHolder(on: connection)
            throw StoreError(code: .locked, message: "a collection is already running on this cluster (\(holder))")
        }
        do {
            let report = try await collectLocked(grace: grace, dryRun: dryRun, on: connection)
            try await connection.query("SELECT pg_advisory_unlock(\(lock))", logger: logger)
            return report
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(lock))", logger: logger)
            throw error
        }
    }

    /// Who holds the collector lock, from `application_name` (`contentstore <host> pid <pid>`).
    private func collectorHolder(on connection: BoundedConnection) async throws -> String {
        let lock = ClusterSchema.AdvisoryLock.collector.rawValue
        let rows = try await connection.query("""
            SELECT a.application_name, a.client_addr::text FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = \(lock >> 32) AND l.objid::bigint = \(lock & 0xFFFF_FFFF) \
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """, logger: logger)
        for (name, address) in try rows.decode((String?, String?).self) {
            return "held by \(name ?? "an unnamed session")" + (address.map { " from \($0)" } ?? "")
        }
        return "its holder just finished"
    }

    private func collectLocked(grace: Duration, dryRun: Bool, on connection: BoundedConnection) async throws -> GarbageCollectionReport {
        var report = GarbageCollectionReport(dryRun: dryRun)
        let graceSeconds = Double(grace.components.seconds) + Double(grace.components.attoseconds) / 1e18
        var horizon = Date.distantPast
        for value in try await connection.query("""
            SELECT least(now() - make_interval(secs => \(graceSeconds)), \
            (SELECT min(horizon) FROM contentstore.leases WHERE expires_at > now()))
            """, logger: logger).decode(Date.self) {
            horizon = value
        }
        if dryRun {
            let rows = try await connection.query("""
                SELECT count(*), coalesce(sum(stored_size), 0)::bigint, coalesce(sum(logical_size), 0)::bigint FROM contentstore.blobs \
                WHERE ref_count = 0 AND zero_since < \(horizon) AND freshened_at < \(horizon)
                """, logger: logger)
            for (count, stored, logical) in try rows.decode((Int64, Int64, Int64).self) {
                report.blobsRemoved = Int(count)
                report.bytesFreed = UInt64(stored)
                report.logicalBytesFreed = UInt64(logical)
            }
            return report
        }
        // Batches, each re-checked by PostgreSQL under the row lock (READ COMMITTED re-evaluates the
        // outer condition for a row a commit or put changed meanwhile). A manifest node deleted
        // releases its children in the same statement; a child left unreferenced has been garbage
        // since its parent was (its zero_since is the parent's), so a later batch of this run can
        // take it unless it was put again since.
        while true {
            let rows = try await connection.query("""
                WITH gone AS (DELETE FROM contentstore.blobs WHERE digest IN (SELECT digest FROM contentstore.blobs \
                WHERE ref_count = 0 AND zero_since < \(horizon) AND freshened_at < \(horizon) LIMIT 1000) \
                AND ref_count = 0 AND zero_since < \(horizon) AND freshened_at < \(horizon) RETURNING stored_size, logical_size, children, zero_since), \
                released AS (SELECT substring(g.children FROM i * 32 + 1 FOR 32) AS digest, count(*) AS n, max(g.zero_since) AS since \
                FROM gone g, generate_series(0, octet_length(g.children) / 32 - 1) AS i WHERE g.children IS NOT NULL GROUP BY 1), \
                adjusted AS (UPDATE contentstore.blobs b SET ref_count = b.ref_count - r.n, \
                zero_since = CASE WHEN b.ref_count = r.n THEN r.since END FROM released r WHERE b.digest = r.digest RETURNING 1) \
                SELECT stored_size, logical_size FROM gone
                """, logger: logger)
            var removed = 0
            for (stored, logical) in try rows.decode((Int64, Int64).self) {
                removed += 1
                report.bytesFreed += UInt64(stored)
                report.logicalBytesFreed += UInt64(logical)
            }
            report.blobsRemoved += removed
            if removed == 0 { break }
        }
        try await packInlineBlobs(on: connection)
        try await connection.query("""
            UPDATE contentstore.packs SET state = 2, condemned_at = now() WHERE state = 1 \
            AND NOT EXISTS (SELECT 1 FROM contentstore.blobs WHERE blobs.pack_id = packs.id)
            """, logger: logger)
        try await deletePacks(before: horizon, report: &report, on: connection)
        try await deleteUnknownObjects(olderThan: Date() - graceSeconds, report: &report, on: connection)
        try await connection.query("DELETE FROM contentstore.leases WHERE expires_at < now()", logger: logger)
        try await connection.query("DELETE FROM contentstore.commit_tokens WHERE created_at < now() - interval '7 days'", logger: logger)
        try await connection.query("DELETE FROM contentstore.instances WHERE heartbeat_at < now() - interval '1 day'", logger: logger)
        return report
    }

    /// Condemned packs and orphaned uploads (intents never registered) older than the horizon. The
    /// row goes first, re-checked: a put registering its intent meanwhile then finds no row and
    /// fails cleanly instead of pointing a blob at an object being deleted. A crash between the
    /// two leaves an object no row names, which the listing below removes.
    private func deletePacks(before horizon: Date, report: inout GarbageCollectionReport, on connection: BoundedConnection) async throws {
        while true {
            var batch: [(Int64, String, Int64)] = []
            let rows = try await connection.query("""
                SELECT id, object_key, size FROM contentstore.packs \
                WHERE (state = 2 AND condemned_at < \(horizon)) OR (state = 0 AND created_at < \(horizon)) ORDER BY id LIMIT 100
                """, logger: logger)
            for row in try rows.decode((Int64, String, Int64).self) { batch.append(row) }
            if batch.isEmpty { return }
            for (id, key, size) in batch {
                var claimed = false
                for _ in try await connection.query("""
                    DELETE FROM contentstore.packs WHERE id = \(id) \
                    AND ((state = 2 AND condemned_at < \(horizon)) OR (state = 0 AND created_at < \(horizon))) RETURNING 1
                    """, logger: logger).decode(Int32.self) { claimed = true }
                guard claimed else { continue }
                try await objects.delete(key)
                report.packsDeleted += 1
                report.bytesReclaimed += UInt64(size)
            }
        }
    }

    /// Objects under `packs/` that no row names (a crash between upload and intent, a restore),
    /// last modified before `cutoff`.
    private func deleteUnknownObjects(olderThan cutoff: Date, report: inout GarbageCollectionReport, on connection: BoundedConnection) async throws {
        var continuation: String?
        repeat {
            let page = try await objects.list(prefix: "packs/", continuation: continuation, maxKeys: 1000)
            continuation = page.continuation
            let old = page.objects.filter { ($0.lastModified ?? .distantFuture) < cutoff }
            guard !old.isEmpty else { continue }
            var known = Set<String>()
            let rows = try await connection.query(
                "SELECT object_key FROM contentstore.packs WHERE object_key = ANY(\(old.map(\.key)))", logger: logger)
            for key in try rows.decode(String.self) { known.insert(key) }
            for object in old where !known.contains(object.key) {
                try await objects.delete(object.key)
                report.packsDeleted += 1
                report.bytesReclaimed += object.size
            }
        } while continuation != nil
    }
}
