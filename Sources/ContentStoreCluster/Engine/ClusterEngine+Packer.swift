import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// The packer (Docs/cluster.md §3.2), run by the collector under its cluster-wide lock: once
/// ``ClusterConfiguration/packSizeTarget`` bytes of inline blobs have accumulated, the oldest of
/// them are written into a pack and their rows moved there, so the database holds at most about
/// one pack's worth of small blobs, not every small blob forever.
///
/// Owns: an inline copy is dropped only in the transaction that turns its pack live (a crash before
/// leaves the rows inline and an intent the collector removes after the grace period); a read sees
/// the row before or after that transaction, and both locations hold verified bytes.
extension ClusterEngine {
    /// Packs written by one collection at most, so a collection's length stays bounded under a
    /// flood of small puts; the next collection goes on.
    static let packsPerCollection = 16

    func packInlineBlobs(on connection: BoundedConnection) async throws {
        let target = Int64(cluster.packSizeTarget)
        for _ in 0 ..< Self.packsPerCollection {
            var inlineBytes: Int64 = 0
            for value in try await connection.query(
                "SELECT coalesce(sum(stored_size), 0)::bigint FROM contentstore.blobs WHERE inline_data IS NOT NULL", logger: logger
            ).decode(Int64.self) { inlineBytes = value }
            guard inlineBytes >= target else { return }
            var pack = PendingPack()
            let entry = Int64(ClusterPackFormat.entryHeaderSize)
            let rows = try await connection.query("""
                SELECT digest, logical_size, codec, inline_data FROM (SELECT digest, logical_size, codec, inline_data, freshened_at, stored_size, \
                sum(stored_size + \(entry)) OVER (ORDER BY freshened_at, digest) AS running FROM contentstore.blobs WHERE inline_data IS NOT NULL) t \
                WHERE running - stored_size - \(entry) < \(target) ORDER BY freshened_at, digest
                """, logger: logger)
            for (digestBytes, logical, codecValue, inline) in try rows.decode((ByteBuffer, Int64, Int16, ByteBuffer).self) {
                let digest = try Digest(buffer: digestBytes, what: "contentstore.blobs")
                guard let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: codecValue)) else {
                    throw StoreError(code: .corrupted, message: "blob \(digest) has unknown codec \(codecValue) in contentstore.blobs")
                }
                pack.append(digest, logicalSize: Int(logical), codec: codec, stored: Array(inline.readableBytesView))
            }
            guard !pack.isEmpty else { return }
            let (bytes, moved) = pack.take()
            try await uploadPack(bytes, blobCount: moved.count) { connection, packID in
                try await connection.query("""
                    UPDATE contentstore.blobs b SET pack_id = \(packID), pack_offset = t.o, inline_data = NULL \
                    FROM unnest(\(moved.map(\.digest.buffer)), \(moved.map(\.offset))) AS t(d, o) \
                    WHERE b.digest = t.d AND b.inline_data IS NOT NULL
                    """, logger: self.logger)
            }
            logger.debug("packed inline blobs", metadata: ["blobs": "\(moved.count)", "bytes": "\(bytes.count)"])
        }
    }
}
