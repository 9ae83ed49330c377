/// Where a blob's entry lives: a pack and the offset of its entry header.
struct BlobLocation: Hashable, Sendable {
    var pack: UInt32
    var offset: UInt64
}

/// What the store knows about one blob: 24 bytes, so the index costs about 56 bytes per blob
/// with its 32-byte key (the checkpoint stores the same fields).
struct BlobEntry: Equatable, Sendable {
    // bit 63: compressed · bit 62: manifest node · bits 40...61: pack id · bits 0...39: entry offset
    // (packs stay far below 1 TiB, and 4 million packs of the default size hold 256 TiB)
    private var packed: UInt64
    var rawLength: UInt32
    var storedLength: UInt32
    var refCount: UInt32
    /// Unix seconds when the count last became zero (or the blob was put or freshened); meaningful while `refCount == 0`.
    var zeroSince: UInt32

    static let maximumPackID: UInt32 = (1 << 22) - 1
    static let maximumOffset: UInt64 = (1 << 40) - 1

    init(location: BlobLocation, compressed: Bool, manifest: Bool, rawLength: UInt32, storedLength: UInt32, refCount: UInt32, zeroSince: UInt32) {
        packed = 0
        self.rawLength = rawLength
        self.storedLength = storedLength
        self.refCount = refCount
        self.zeroSince = zeroSince
        setLocation(location, compressed: compressed, manifest: manifest)
    }

    init(packed: UInt64, rawLength: UInt32, storedLength: UInt32, refCount: UInt32, zeroSince: UInt32) {
        self.packed = packed
        self.rawLength = rawLength
        self.storedLength = storedLength
        self.refCount = refCount
        self.zeroSince = zeroSince
    }

    var packedLocation: UInt64 { packed }
    var isCompressed: Bool { packed >> 63 == 1 }
    /// A node of a chunked blob's manifest tree (Chunking/ManifestNode.swift): its payload lists
    /// children, each of which holds one reference from it.
    var isManifest: Bool { (packed >> 62) & 1 == 1 }
    var location: BlobLocation { BlobLocation(pack: UInt32((packed >> 40) & UInt64(BlobEntry.maximumPackID)), offset: packed & BlobEntry.maximumOffset) }
    /// Content bytes the entry holds: its length, or nothing for a manifest node (the chunks a
    /// manifest lists hold the content).
    var contentLength: UInt64 { isManifest ? 0 : UInt64(rawLength) }
    /// Bytes the entry occupies in its pack, header included.
    var entryLength: UInt64 { UInt64(PackFormat.entryHeaderSize) + UInt64(storedLength) }

    mutating func setLocation(_ location: BlobLocation, compressed: Bool, manifest: Bool) {
        precondition(location.pack <= BlobEntry.maximumPackID && location.offset <= BlobEntry.maximumOffset, "pack location out of range")
        packed = (compressed ? 1 << 63 : 0) | (manifest ? 1 << 62 : 0) | UInt64(location.pack) << 40 | location.offset
    }
}
