/// How ``Store/collectGarbage(_:)`` runs.
public struct GarbageCollectionOptions: Sendable, Hashable {
    /// How long a blob must have been unreferenced to be removed; nil uses the configuration's.
    public var gracePeriod: Duration?
    /// Report what would be removed and rewritten, and change nothing.
    public var dryRun: Bool = false
    /// Rewrite packs whose dead fraction (of their entry bytes) reaches this, in (0, 1]; nil uses
    /// the configuration's ``Store/Configuration/packRewriteThreshold``.
    public var packRewriteThreshold: Double?

    /// The defaults: the configuration's grace period, not a dry run.
    public init() {}

    /// Options with a grace period and dry-run flag.
    public init(gracePeriod: Duration?, dryRun: Bool = false) {
        self.gracePeriod = gracePeriod
        self.dryRun = dryRun
    }
}

/// What a collection removed (or, in a dry run, would remove).
public struct GarbageCollectionReport: Codable, Sendable, Hashable {
    /// Blobs removed from the index.
    public var blobsRemoved: Int
    /// Stored bytes (pack entries) of the removed blobs. They return to the disk when their pack is rewritten or deleted.
    public var bytesFreed: UInt64
    /// Uncompressed bytes of the removed blobs.
    public var logicalBytesFreed: UInt64
    /// Packs whose live blobs were copied to a new pack before the pack was deleted.
    public var packsRewritten: Int
    /// Pack files deleted (rewritten ones included).
    public var packsDeleted: Int
    /// Packs due for a rewrite but kept because an entry in them is damaged (run `verify`).
    public var packsSkipped: Int
    /// Bytes copied while rewriting packs.
    public var bytesCopied: UInt64
    /// Disk bytes returned: deleted packs' sizes less the bytes copied out of them.
    public var bytesReclaimed: UInt64
    /// Whether this was a dry run.
    public var dryRun: Bool
    /// Wall-clock time the collection took.
    public var duration: Duration

    package init(dryRun: Bool) {
        blobsRemoved = 0
        bytesFreed = 0
        logicalBytesFreed = 0
        packsRewritten = 0
        packsDeleted = 0
        packsSkipped = 0
        bytesCopied = 0
        bytesReclaimed = 0
        self.dryRun = dryRun
        duration = .zero
    }
}

extension GarbageCollectionReport {
    private enum CodingKeys: String, CodingKey {
        case blobsRemoved, bytesFreed, logicalBytesFreed, packsRewritten, packsDeleted, packsSkipped, bytesCopied, bytesReclaimed, dryRun, duration
    }

    /// Encodes every member under its own name; `duration` as seconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(blobsRemoved, forKey: .blobsRemoved)
        try container.encode(bytesFreed, forKey: .bytesFreed)
        try container.encode(logicalBytesFreed, forKey: .logicalBytesFreed)
        try container.encode(packsRewritten, forKey: .packsRewritten)
        try container.encode(packsDeleted, forKey: .packsDeleted)
        try container.encode(packsSkipped, forKey: .packsSkipped)
        try container.encode(bytesCopied, forKey: .bytesCopied)
        try container.encode(bytesReclaimed, forKey: .bytesReclaimed)
        try container.encode(dryRun, forKey: .dryRun)
        try container.encode(duration.seconds, forKey: .duration)
    }

    /// Decodes what ``encode(to:)`` wrote.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        blobsRemoved = try container.decode(Int.self, forKey: .blobsRemoved)
        bytesFreed = try container.decode(UInt64.self, forKey: .bytesFreed)
        logicalBytesFreed = try container.decode(UInt64.self, forKey: .logicalBytesFreed)
        packsRewritten = try container.decode(Int.self, forKey: .packsRewritten)
        packsDeleted = try container.decode(Int.self, forKey: .packsDeleted)
        packsSkipped = try container.decodeIfPresent(Int.self, forKey: .packsSkipped) ?? 0
        bytesCopied = try container.decode(UInt64.self, forKey: .bytesCopied)
        bytesReclaimed = try container.decode(UInt64.self, forKey: .bytesReclaimed)
        dryRun = try container.decode(Bool.self, forKey: .dryRun)
        duration = .seconds(try container.decode(Double.self, forKey: .duration))
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
