import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Pack uploads (Docs/cluster.md §3.1 step 4), shared by single puts, streaming puts and the
/// packer: the intent row, the conditional upload, then one transaction that turns the pack live
/// together with the rows that point into it.
///
/// Owns rule 2 for packed bytes: no `blobs` row points into a pack before the pack is live, and a
/// pack turns live only while its intent row is still there (the collector deletes an intent's row
/// before its object), so a row never points at bytes that are not durably in the bucket.
extension ClusterEngine {
    /// Uploads `pack` and runs `register` (given the pack's id) in the transaction that turns it
    /// live. A pack whose blobs another instance registered first holds no live blob and is
    /// collected; one whose intent was collected meanwhile fails the call with `io`.
    func uploadPack(_ pack: [UInt8], blobCount: Int,
                    register: @escaping @Sendable (PostgresConnection, Int64) async throws -> Void) async throws {
        let objectKey = Self.packObjectKey(for: pack)
        let instanceID = instanceID
        let packID: Int64 = try await database.run("register a pack upload") { connection in
            let rows = try await connection.query("""
                INSERT INTO contentstore.packs (object_key, state, size, blob_count, instance_id) \
                VALUES (\(objectKey), 0, \(Int64(pack.count)), \(Int32(clamping: blobCount)), \(instanceID)) RETURNING id
                """, logger: self.logger)
            for try await id in rows.decode(Int64.self) { return id }
            throw StoreError(code: .io, message: "PostgreSQL returned no id for pack \(objectKey)")
        }
        _ = try await objects.put(objectKey, bytes: pack, ifAbsent: true)
        try await database.run("register an uploaded pack") { connection in
            try await self.inTransaction(connection) {
                var registered = false
                for try await _ in try await connection.query(
                    "UPDATE contentstore.packs SET state = 1 WHERE id = \(packID) AND state = 0 RETURNING 1", logger: self.logger
                ).decode(Int32.self) { registered = true }
                guard registered else {
                    throw StoreError(code: .io, message: "the upload intent of pack \(objectKey) was collected before the upload finished "
                                     + "(the grace period is shorter than the upload); nothing was stored", path: objectKey)
                }
                try await register(connection, packID)
            }
        }
    }

    /// A fresh object key for `pack` (§2.2). The content hash names the bytes; the intent's own nonce
    /// keeps two intents of identical bytes (the same blob put twice, one copy condemned meanwhile)
    /// from sharing an object.
    static func packObjectKey(for pack: [UInt8]) -> String {
        let contentHex = Digest.sha256(pack).hex
        return "packs/\(contentHex.prefix(2))/\(contentHex)-\(UUID().uuidString.lowercased().prefix(8)).pack"
    }

    /// `body` again (up to 8 tries in all) when PostgreSQL aborted it for a deadlock or a
    /// serialization failure: a statement that locks many blob rows can meet a commit locking them
    /// in another order, and one side is aborted with nothing changed.
    func retryingConflicts<T>(_ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as PSQLError where attempt < 7 && ["40001", "40P01"].contains(error.serverInfo?[.sqlState]) {
                attempt += 1
                try await Task.sleep(for: .milliseconds(Int64.random(in: 1 ... Int64(5 * attempt))))
            }
        }
    }

    /// `body` in one transaction on `connection`: committed when it returns, rolled back when it throws.
    func inTransaction<T>(_ connection: PostgresConnection, _ body: () async throws -> T) async throws -> T {
        try await connection.query("BEGIN", logger: logger)
        do {
            let result = try await body()
            try await connection.query("COMMIT", logger: logger)
            return result
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Inserts the rows of `rows`, all in pack `packID` (in the transaction that turns it live);
    /// a digest another put registered first is freshened instead, and its copy here is dead bytes.
    func insertPackedRows(_ rows: [PendingPack.Row], packID: Int64, on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        try await connection.query("""
            INSERT INTO contentstore.blobs (digest, logical_size, stored_size, codec, pack_id, pack_offset, ref_count, zero_since, freshened_at) \
            SELECT t.d, t.l, t.s, t.c, \(packID), t.o, 0, now(), now() \
            FROM unnest(\(rows.map(\.digest.buffer)), \(rows.map(\.logicalSize)), \(rows.map(\.storedSize)), \(rows.map(\.codec)), \
            \(rows.map(\.offset))) AS t(d, l, s, c, o) \
            ON CONFLICT (digest) DO UPDATE SET freshened_at = now()
            """, logger: logger)
    }
}

/// Blobs gathered for one pack object, and the `blobs` rows that will point into it.
struct PendingPack {
    /// A blob's row as it will point into the pack.
    struct Row: Sendable {
        var digest: Digest
        var logicalSize: Int64
        var storedSize: Int64
        var codec: Int16
        var offset: Int64
    }

    private var builder: ClusterPackFormat.Builder
    private(set) var rows: [Row] = []
    private var digests = Set<Digest>()
    private let capacity: Int

    /// A pending pack whose buffer is allocated once for about `capacity` bytes (0: grown as needed).
    init(capacity: Int = 0) {
        self.capacity = capacity
        builder = capacity > 0 ? ClusterPackFormat.Builder(reservingCapacity: capacity) : ClusterPackFormat.Builder()
    }

    /// Bytes of entries so far (the index and trailer add 56 bytes per blob and 32).
    var byteCount: Int { builder.bytes.count }
    var isEmpty: Bool { rows.isEmpty }

    func holds(_ digest: Digest) -> Bool { digests.contains(digest) }

    /// Appends a blob's stored form; a digest already in the pack is not appended twice.
    mutating func append(_ digest: Digest, logicalSize: Int, codec: ClusterPackFormat.Codec, stored: [UInt8]) {
        guard digests.insert(digest).inserted else { return }
        let row = digest.withUnsafeBytes { bytes in
            builder.append(.init(digest: [UInt8](bytes), codec: codec, logicalLength: UInt64(logicalSize), stored: stored))
        }
        rows.append(Row(digest: digest, logicalSize: Int64(logicalSize), storedSize: Int64(stored.count),
                        codec: Int16(codec.rawValue), offset: Int64(row.entryOffset)))
    }

    /// The sealed pack object; the pending pack is empty afterwards.
    mutating func take() -> (bytes: [UInt8], rows: [Row]) {
        let taken = (builder.finish(), rows)
        self = PendingPack(capacity: capacity)
        return taken
    }
}
