import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Storing a group of single-blob puts (Docs/cluster.md §3.1 steps 2–4) in three statements and one
/// upload whatever the group's size.
///
/// Owns rule 2 for grouped puts: an inline blob's row is its bytes, committed by the statement that
/// inserts it; a packed blob's row is inserted only by the statement that turns its pack live, and
/// only while the pack's intent is still there, so a row never points at bytes not durably stored.
extension ClusterEngine {
    /// Stores `members` (one put each, any digest possibly repeated); returns once every one has a
    /// committed row, except those it returns: the packed blobs whose upload or registration failed
    /// (the inline ones and those the store held are stored by then). Throws when nothing was stored.
    func storeGroup(_ members: [PutGroup.Member]) async throws -> PutGroup.Failures {
        // Sorted, so two groups (or a group and a commit) lock the rows they share in one order.
        var seen = Set<Digest>()
        let unique = members.filter { seen.insert($0.digest).inserted }.sorted { $0.digest < $1.digest }
        let inline = unique.filter { $0.stored.count <= Self.inlineLimit }
        let packed = unique.filter { $0.stored.count > Self.inlineLimit }
        let held = try await insertInlineFreshening(inline, packed: packed.map(\.digest))
        var pack = PendingPack()
        for member in packed where !held.contains(member.digest) {
            pack.append(member.digest, logicalSize: member.logicalSize, codec: member.codec, stored: member.stored)
        }
        guard !pack.isEmpty else { return [:] }
        let (bytes, rows) = pack.take()
        do {
            try await uploadGroupPack(bytes, rows: rows.sorted { $0.digest < $1.digest })
            return [:]
        } catch {
            return Dictionary(rows.map { ($0.digest, error) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// One statement: inserts the inline blobs (a digest already there is freshened instead) and
    /// freshens the digests of `packed` (§3.1 step 2); returns those of `packed` the store holds.
    private func insertInlineFreshening(_ inline: [PutGroup.Member], packed: [Digest]) async throws -> Set<Digest> {
        try await database.run("store small blobs") { connection in try await self.retryingConflicts {
            let rows = try await connection.query("""
                WITH fresh AS (UPDATE contentstore.blobs SET freshened_at = now() WHERE digest = ANY(\(packed.map(\.buffer))) RETURNING digest), \
                added AS (INSERT INTO contentstore.blobs (digest, logical_size, stored_size, codec, inline_data, ref_count, zero_since, freshened_at) \
                SELECT t.d, t.l, t.s, t.c, t.b, 0, now(), now() \
                FROM unnest(\(inline.map(\.digest.buffer)), \(inline.map { Int64($0.logicalSize) }), \(inline.map { Int64($0.stored.count) }), \
                \(inline.map { Int16($0.codec.rawValue) }), \(inline.map { ByteBuffer(bytes: $0.stored) })) AS t(d, l, s, c, b) \
                ON CONFLICT (digest) DO UPDATE SET freshened_at = now() RETURNING 1) \
                SELECT digest FROM fresh
                """, logger: self.logger)
            var held = Set<Digest>()
            for try await buffer in rows.decode(ByteBuffer.self) { held.insert(try Digest(buffer: buffer, what: "contentstore.blobs")) }
            return held
        } }
    }

    /// §3.1 step 4 in two statements around the upload: the intent inserted together with a `put`
    /// lease (so a collection with a grace period shorter than the upload spares the intent), then
    /// the pack turned live together with its blobs' rows — only if the intent is still there.
    private func uploadGroupPack(_ pack: [UInt8], rows: [PendingPack.Row]) async throws {
        let objectKey = Self.packObjectKey(for: pack)
        let instanceID = instanceID, leaseID = UUID(), sent = ContinuousClock.now, life = leases.lifeSeconds
        let packID: Int64 = try await database.run("register a pack upload") { connection in
            let rows = try await connection.query("""
                WITH lease AS (INSERT INTO contentstore.leases (id, instance_id, kind, horizon, expires_at) \
                VALUES (\(leaseID), \(instanceID), 'put', now(), now() + make_interval(secs => \(life)))) \
                INSERT INTO contentstore.packs (object_key, state, size, blob_count, instance_id) \
                VALUES (\(objectKey), 0, \(Int64(pack.count)), \(Int32(clamping: rows.count)), \(instanceID)) RETURNING id
                """, logger: self.logger)
            for try await id in rows.decode(Int64.self) { return id }
            throw StoreError(code: .io, message: "PostgreSQL returned no id for pack \(objectKey)")
        }
        leases.taken(leaseID, sentAt: sent)
        let lease = Lease(id: leaseID, kind: "put", database: database, clock: leases)
        defer { withExtendedLifetime(lease) {} }
        _ = try await objects.put(objectKey, bytes: pack, ifAbsent: true)
        let live: Bool = try await database.run("register an uploaded pack") { connection in try await self.retryingConflicts {
            let result = try await connection.query("""
                WITH live AS (UPDATE contentstore.packs SET state = 1 WHERE id = \(packID) AND state = 0 RETURNING id), \
                added AS (INSERT INTO contentstore.blobs (digest, logical_size, stored_size, codec, pack_id, pack_offset, ref_count, zero_since, freshened_at) \
                SELECT t.d, t.l, t.s, t.c, live.id, t.o, 0, now(), now() \
                FROM unnest(\(rows.map(\.digest.buffer)), \(rows.map(\.logicalSize)), \(rows.map(\.storedSize)), \(rows.map(\.codec)), \
                \(rows.map(\.offset))) AS t(d, l, s, c, o) CROSS JOIN live \
                ON CONFLICT (digest) DO UPDATE SET freshened_at = now() RETURNING 1) \
                SELECT count(*) FROM live
                """, logger: self.logger)
            for try await count in result.decode(Int64.self) { return count == 1 }
            return false
        } }
        guard live else {
            throw StoreError(code: .io, message: "the upload intent of pack \(objectKey) was collected before the upload finished "
                             + "(the grace period is shorter than the upload); nothing was stored", path: objectKey)
        }
    }
}
