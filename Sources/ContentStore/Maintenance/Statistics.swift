import Foundation

/// What a store holds, as ``Store/statistics()`` reports it. Computed from running totals: no scan.
public struct Statistics: Codable, Sendable, Hashable {
    /// Distinct blobs held.
    public var blobCount: Int
    /// Uncompressed bytes of those blobs.
    public var logicalBytes: UInt64
    /// Bytes of pack files on disk (live, dead and overhead).
    public var storedBytes: UInt64
    /// Records held.
    public var recordCount: Int
    /// Bytes of WAL segments not yet folded into a checkpoint.
    public var walBytes: UInt64
    /// Pack files.
    public var packCount: Int
    /// Bytes of pack entries that belong to held blobs (headers included).
    public var liveStoredBytes: UInt64
    /// Blobs no record references: garbage once their grace period has passed.
    public var unreferencedBlobCount: Int

    /// `logicalBytes / liveStoredBytes`: how much compression saves (1 when nothing compresses).
    public var compressionRatio: Double { liveStoredBytes == 0 ? 1 : Double(logicalBytes) / Double(liveStoredBytes) }
}

extension Store {
    /// Counts and sizes of what the store holds.
    public func statistics() throws -> Statistics {
        try checkOpen()
        let state = core.withLock { $0.state }
        return Statistics(
            blobCount: state.blobs.count, logicalBytes: state.blobs.logicalBytes, storedBytes: packs.totalBytes,
            recordCount: state.records.count, walBytes: wal.totalBytes, packCount: packs.packIDs.count,
            liveStoredBytes: state.blobs.liveBytesByPack.values.reduce(0, +),
            unreferencedBlobCount: state.blobs.unreferenced.count)
    }
}
