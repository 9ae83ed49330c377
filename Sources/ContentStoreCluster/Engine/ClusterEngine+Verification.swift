import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// `verify` and `statistics` over the whole cluster (Docs/cluster.md §9).
///
/// Verify reads the database in one REPEATABLE READ transaction (one consistent state, however
/// many commits run meanwhile), then checks the objects; it changes nothing. Memory is bounded by
/// one pack and one page of rows, whatever the number of blobs.
extension ClusterEngine {
    func verify(_ options: VerificationOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> VerificationReport {
        let database = database
        try wait { try await database.open() }
        let state = try query("verify") { connection in try await self.verifyRows(on: connection) }
        var problems = state.problems
        for pack in state.packs {
            problems += try wait { try await self.verifyPack(pack, readData: options.readData) }
        }
        if options.readData {
            problems += try verifyInlineBlobs()
        }
        return VerificationReport(problems: problems, blobsChecked: state.blobCount, recordsChecked: state.recordCount,
                                  walSegmentsChecked: 0, readData: options.readData)
    }

    private struct RowsState: Sendable {
        var problems: [VerificationReport.Problem] = []
        var packs: [PackRow] = []
        var blobCount = 0
        var recordCount = 0
    }

    struct PackRow: Sendable {
        var id: Int64
        var key: String
        var size: Int64
    }

    /// References against rows, counts against a recount, locations against live packs.
    private func verifyRows(on connection: PostgresConnection) async throws -> RowsState {
        try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
        do {
            let state = try await verifyRowsInTransaction(on: connection)
            try await connection.query("COMMIT", logger: logger)
            return state
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    private func verifyRowsInTransaction(on connection: PostgresConnection) async throws -> RowsState {
        var state = RowsState()
        let recount = try await connection.query("""
            WITH refs AS (SELECT substring(r.refs FROM i * 32 + 1 FOR 32) AS digest, r.key FROM contentstore.records r, \
            generate_series(0, octet_length(r.refs) / 32 - 1) AS i \
            UNION ALL SELECT substring(m.children FROM i * 32 + 1 FOR 32), NULL FROM contentstore.blobs m, \
            generate_series(0, octet_length(m.children) / 32 - 1) AS i WHERE m.children IS NOT NULL), \
            counted AS (SELECT digest, count(*) AS n, min(key) AS key FROM refs GROUP BY digest) \
            SELECT coalesce(b.digest, c.digest), b.ref_count, coalesce(c.n, 0), c.key FROM contentstore.blobs b \
            FULL JOIN counted c ON c.digest = b.digest WHERE b.digest IS NULL OR b.ref_count <> coalesce(c.n, 0) LIMIT 10000
            """, logger: logger)
        for try await (digestBytes, count, recounted, key) in recount.decode((ByteBuffer, Int64?, Int64, String?).self) {
            let digest = try Digest(buffer: digestBytes, what: "contentstore.records.refs")
            if let count {
                state.problems.append(.finding(kind: "refCount", message: "blob \(digest) has reference count \(count); records and manifest nodes hold \(recounted) references",
                                               digest: digest))
            } else if key == nil {
                state.problems.append(.finding(kind: "missingBlob", message: "a manifest node lists blob \(digest), which contentstore.blobs lacks",
                                               digest: digest))
            } else {
                state.problems.append(.finding(kind: "missingBlob", message: "record \"\(key ?? "?")\" references blob \(digest), which contentstore.blobs lacks",
                                               digest: digest, key: key))
            }
        }
        let stranded = try await connection.query("""
            SELECT b.digest, p.object_key, p.state FROM contentstore.blobs b JOIN contentstore.packs p ON p.id = b.pack_id \
            WHERE p.state <> 1 LIMIT 10000
            """, logger: logger)
        for try await (digestBytes, key, packState) in stranded.decode((ByteBuffer, String, Int16).self) {
            let digest = try Digest(buffer: digestBytes, what: "contentstore.blobs")
            state.problems.append(.finding(kind: "missingPack", message: "blob \(digest) lies in pack \(key), which is in state \(packState), not live",
                                           path: key, digest: digest))
        }
        for try await (blobs, records) in try await connection.query(
            "SELECT (SELECT count(*) FROM contentstore.blobs), (SELECT count(*) FROM contentstore.records)", logger: logger
        ).decode((Int64, Int64).self) {
            state.blobCount = Int(blobs)
            state.recordCount = Int(records)
        }
        for try await (id, key, size) in try await connection.query(
            "SELECT id, object_key, size FROM contentstore.packs WHERE state = 1 ORDER BY id", logger: logger
        ).decode((Int64, String, Int64).self) {
            state.packs.append(PackRow(id: id, key: key, size: size))
        }
        return state
    }

    /// A live pack exists with its size; with `readData`, its index parses and every blob row
    /// pointing into it reads back, decompresses and hashes to its digest.
    private func verifyPack(_ pack: PackRow, readData: Bool) async throws -> [VerificationReport.Problem] {
        guard let info = try await objects.head(pack.key) else {
            return [.finding(kind: "missingPack", message: "pack object \(pack.key) is missing from the bucket", path: pack.key)]
        }
        guard info.size == UInt64(pack.size) else {
            return [.finding(kind: "packHeader", message: "pack object \(pack.key) is \(info.size) bytes; contentstore.packs says \(pack.size)",
                             path: pack.key)]
        }
        guard readData else { return [] }
        let bytes = try await objects.get(pack.key, range: nil)
        do {
            _ = try ClusterPackFormat.parseIndex(bytes, objectKey: pack.key)
        } catch let error as StoreError {
            return [.finding(kind: "packHeader", message: error.message, path: pack.key, offset: error.offset)]
        }
        var problems: [VerificationReport.Problem] = []
        typealias Row = (ByteBuffer, Int64, Int64, Int64, Int16, Bool, Int64?)
        let rows: [Row] = try await database.run("verify a pack's blobs") { connection in
            var rows: [Row] = []
            for try await row in try await connection.query("""
                SELECT digest, pack_offset, logical_size, stored_size, codec, children IS NOT NULL, content_size FROM contentstore.blobs \
                WHERE pack_id = \(pack.id)
                """,
                logger: self.logger
            ).decode(Row.self) { rows.append(row) }
            return rows
        }
        for (digestBytes, offset, logical, stored, codecValue, isNode, contentSize) in rows {
            let digest = try Digest(buffer: digestBytes, what: "contentstore.blobs")
            do {
                guard let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: codecValue)),
                      offset >= 0, Int(offset) + ClusterPackFormat.entryHeaderSize + Int(stored) <= bytes.count else {
                    throw StoreError(code: .corrupted, message: "blob \(digest) has a location outside pack \(pack.key)", path: pack.key)
                }
                let end = Int(offset) + ClusterPackFormat.entryHeaderSize + Int(stored)
                let expected = ClusterPackFormat.IndexRow(digest: digest.withUnsafeBytes { [UInt8]($0) }, entryOffset: UInt64(offset),
                                                          logicalLength: UInt64(logical), storedLength: UInt32(clamping: stored), codec: codec)
                let entry = try ClusterPackFormat.parseEntry(Array(bytes[Int(offset) ..< end]), expected: expected, objectKey: pack.key)
                let location = "pack \(pack.key) at offset \(offset)"
                let data = try decode(entry.stored, codec: codec, logicalSize: Int(logical), digest: digest, location: location)
                _ = try StoredBlob(data, of: digest, isNode: isNode, contentSize: contentSize, location: location, verifying: true)
            } catch let error as StoreError {
                problems.append(.finding(kind: "blobData", message: error.message, path: pack.key, offset: UInt64(max(0, offset)), digest: digest))
            }
        }
        return problems
    }

    /// Every inline blob decompresses and hashes to its digest, a page at a time.
    private func verifyInlineBlobs() throws -> [VerificationReport.Problem] {
        var problems: [VerificationReport.Problem] = []
        var after = ByteBuffer()
        typealias Row = (ByteBuffer, Int64, Int16, ByteBuffer, Bool, Int64?)
        while true {
            let cursor = after
            let page: [Row] = try query("verify inline blobs") { connection in
                var rows: [Row] = []
                for try await row in try await connection.query("""
                    SELECT digest, logical_size, codec, inline_data, children IS NOT NULL, content_size FROM contentstore.blobs \
                    WHERE inline_data IS NOT NULL AND digest > \(cursor) ORDER BY digest LIMIT 500
                    """, logger: self.logger).decode(Row.self) { rows.append(row) }
                return rows
            }
            guard let last = page.last else { return problems }
            after = last.0
            for (digestBytes, logical, codecValue, inline, isNode, contentSize) in page {
                let digest = try Digest(buffer: digestBytes, what: "contentstore.blobs")
                let location = "contentstore.blobs.inline_data"
                do {
                    guard let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: codecValue)) else {
                        throw StoreError(code: .corrupted, message: "blob \(digest) has unknown codec \(codecValue)")
                    }
                    let data = try decode(Array(inline.readableBytesView), codec: codec, logicalSize: Int(logical), digest: digest, location: location)
                    _ = try StoredBlob(data, of: digest, isNode: isNode, contentSize: contentSize, location: location, verifying: true)
                } catch let error as StoreError {
                    problems.append(.finding(kind: "blobData", message: error.message, path: location, digest: digest))
                }
            }
        }
    }

    func statistics() throws -> Statistics {
        try query("read statistics") { connection in
            var statistics = Statistics(blobCount: 0, logicalBytes: 0, storedBytes: 0, recordCount: 0, walBytes: 0, packCount: 0,
                                        liveStoredBytes: 0, unreferencedBlobCount: 0, unreferencedLogicalBytes: 0, referencedBytes: 0)
            let blobs = try await connection.query("""
                SELECT count(*), coalesce(sum(logical_size), 0)::bigint, coalesce(sum(stored_size), 0)::bigint, \
                coalesce(sum(stored_size) FILTER (WHERE inline_data IS NOT NULL), 0)::bigint, \
                count(*) FILTER (WHERE ref_count = 0), coalesce(sum(logical_size) FILTER (WHERE ref_count = 0), 0)::bigint, \
                coalesce(sum(logical_size) FILTER (WHERE ref_count > 0), 0)::bigint FROM contentstore.blobs
                """, logger: self.logger)
            var inlineBytes: Int64 = 0
            for try await (count, logical, stored, inline, unreferenced, unreferencedLogical, referenced) in blobs.decode(
                (Int64, Int64, Int64, Int64, Int64, Int64, Int64).self) {
                statistics.blobCount = Int(count)
                statistics.logicalBytes = UInt64(logical)
                statistics.liveStoredBytes = UInt64(stored)
                inlineBytes = inline
                statistics.unreferencedBlobCount = Int(unreferenced)
                statistics.unreferencedLogicalBytes = UInt64(unreferencedLogical)
                statistics.referencedBytes = UInt64(referenced)
            }
            for try await (packs, packBytes, records) in try await connection.query("""
                SELECT count(*), coalesce(sum(size), 0)::bigint, (SELECT count(*) FROM contentstore.records) \
                FROM contentstore.packs WHERE state = 1
                """, logger: self.logger).decode((Int64, Int64, Int64).self) {
                statistics.packCount = Int(packs)
                statistics.storedBytes = UInt64(packBytes + inlineBytes)
                statistics.recordCount = Int(records)
            }
            return statistics
        }
    }
}
