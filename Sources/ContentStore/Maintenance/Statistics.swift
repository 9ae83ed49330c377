import Foundation

/// What a store holds, as ``Store/statistics()`` reports it.
///
/// Computed from running totals and the set of unreferenced blobs: the cost follows the garbage and
/// the number of packs, never the number of blobs.
public struct Statistics: Codable, Sendable, Hashable {
    /// Distinct blobs held (a chunked blob counts as its chunks and manifest nodes, shared ones once).
    public var blobCount: Int
    /// Uncompressed bytes of those blobs. A chunked blob counts through its chunks, so bytes that
    /// versions of a large file share count once; its manifest nodes count nothing here (their
    /// pack entries are in ``liveStoredBytes``).
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
    /// Blobs no record references: garbage once their grace period has passed. An unreferenced
    /// chunked blob counts as its root node only: its chunks stay referenced by its nodes until
    /// collection drops them level by level (`collectGarbage` with `dryRun` reports the whole
    /// cascade, at the cost of reading the nodes; these figures read nothing).
    public var unreferencedBlobCount: Int
    /// Uncompressed bytes of the unreferenced blobs (a chunked blob's root adds none, see
    /// ``unreferencedBlobCount``).
    public var unreferencedLogicalBytes: UInt64
    /// Uncompressed bytes the records reference, counting a blob once per reference: what the
    /// records would occupy without deduplication.
    public var referencedBytes: UInt64

    /// `logicalBytes / liveStoredBytes`: how much compression saves (1 when nothing compresses).
    public var compressionRatio: Double { liveStoredBytes == 0 ? 1 : Double(logicalBytes) / Double(liveStoredBytes) }

    /// `referencedBytes` over the uncompressed bytes of the referenced blobs: how much storing each
    /// blob once saves (1 when no two references share a blob).
    public var deduplicationRatio: Double {
        let distinct = logicalBytes - min(logicalBytes, unreferencedLogicalBytes)
        return distinct == 0 ? 1 : Double(referencedBytes) / Double(distinct)
    }

    /// `storedBytes - liveStoredBytes`: pack bytes no held blob uses (dead entries, pack headers and
    /// indexes); collection returns the dead entries to the disk as it rewrites and deletes packs.
    public var deadStoredBytes: UInt64 { storedBytes - min(storedBytes, liveStoredBytes) }

    private enum CodingKeys: String, CodingKey {
        case blobCount, logicalBytes, storedBytes, recordCount, walBytes, packCount, liveStoredBytes
        case unreferencedBlobCount, unreferencedLogicalBytes, referencedBytes
        case compressionRatio, deduplicationRatio, deadStoredBytes
    }

    package init(blobCount: Int, logicalBytes: UInt64, storedBytes: UInt64, recordCount: Int, walBytes: UInt64, packCount: Int,
         liveStoredBytes: UInt64, unreferencedBlobCount: Int, unreferencedLogicalBytes: UInt64, referencedBytes: UInt64) {
        self.blobCount = blobCount
        self.logicalBytes = logicalBytes
        self.storedBytes = storedBytes
        self.recordCount = recordCount
        self.walBytes = walBytes
        self.packCount = packCount
        self.liveStoredBytes = liveStoredBytes
        self.unreferencedBlobCount = unreferencedBlobCount
        self.unreferencedLogicalBytes = unreferencedLogicalBytes
        self.referencedBytes = referencedBytes
    }

    /// Encodes every member under its own name, the derived ratios and dead bytes included.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(blobCount, forKey: .blobCount)
        try container.encode(logicalBytes, forKey: .logicalBytes)
        try container.encode(storedBytes, forKey: .storedBytes)
        try container.encode(recordCount, forKey: .recordCount)
        try container.encode(walBytes, forKey: .walBytes)
        try container.encode(packCount, forKey: .packCount)
        try container.encode(liveStoredBytes, forKey: .liveStoredBytes)
        try container.encode(unreferencedBlobCount, forKey: .unreferencedBlobCount)
        try container.encode(unreferencedLogicalBytes, forKey: .unreferencedLogicalBytes)
        try container.encode(referencedBytes, forKey: .referencedBytes)
        try container.encode(compressionRatio, forKey: .compressionRatio)
        try container.encode(deduplicationRatio, forKey: .deduplicationRatio)
        try container.encode(deadStoredBytes, forKey: .deadStoredBytes)
    }

    /// Decodes what ``encode(to:)`` wrote (the derived members are recomputed).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        blobCount = try container.decode(Int.self, forKey: .blobCount)
        logicalBytes = try container.decode(UInt64.self, forKey: .logicalBytes)
        storedBytes = try container.decode(UInt64.self, forKey: .storedBytes)
        recordCount = try container.decode(Int.self, forKey: .recordCount)
        walBytes = try container.decode(UInt64.self, forKey: .walBytes)
        packCount = try container.decode(Int.self, forKey: .packCount)
        liveStoredBytes = try container.decode(UInt64.self, forKey: .liveStoredBytes)
        unreferencedBlobCount = try container.decode(Int.self, forKey: .unreferencedBlobCount)
        unreferencedLogicalBytes = try container.decode(UInt64.self, forKey: .unreferencedLogicalBytes)
        referencedBytes = try container.decode(UInt64.self, forKey: .referencedBytes)
    }
}

extension LocalEngine {
    /// Counts and sizes of what the store holds. Reads no file.
    func statistics() throws -> Statistics {
        try checkOpen()
        // Everything is read under the lock rather than from a copy of the state: a copy held while
        // a writer changes the index would make that writer copy the whole index.
        var statistics = try core.withLock { core -> Statistics in
            guard core.isOpen else { throw Store.closedError }
            let blobs = core.state.blobs
            var unreferencedBytes: UInt64 = 0
            for digest in blobs.unreferenced { unreferencedBytes += blobs[digest]?.contentLength ?? 0 }
            return Statistics(
                blobCount: blobs.count, logicalBytes: blobs.logicalBytes, storedBytes: 0,
                recordCount: core.state.records.count, walBytes: 0, packCount: 0,
                liveStoredBytes: blobs.liveBytesByPack.values.reduce(0, +),
                unreferencedBlobCount: blobs.unreferenced.count, unreferencedLogicalBytes: unreferencedBytes,
                referencedBytes: blobs.referencedLogicalBytes)
        }
        statistics.storedBytes = packs.totalBytes
        statistics.packCount = packs.packIDs.count
        statistics.walBytes = wal.totalBytes
        metrics.record(blobCount: statistics.blobCount, recordCount: statistics.recordCount, storedBytes: statistics.storedBytes)
        return statistics
    }
}
