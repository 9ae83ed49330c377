/// The WAL records of chunked blobs. A manifest node holds one reference to each child it lists,
/// so the records that add or remove a node carry its children: replay moves the same counts the
/// live process moved without reading a pack (Docs/on-disk-format.md, "WAL records").
extension LogRecord {
    /// A new manifest node: its pack entry, the children it references, in order (a child listed
    /// twice holds two references), and for the root of a chunked blob its logical size.
    struct ManifestPlacement: Equatable {
        var placement: BlobPlacement
        /// The whole blob's size when this node is a root (indexed under the content's digest); nil
        /// for an inner node (indexed under ``ManifestNode/digest(of:)``).
        var logicalSize: UInt64?
        var children: [Digest]
    }

    /// A manifest node collection removed, with the children whose references it released.
    struct ManifestDrop: Equatable {
        var digest: Digest
        var children: [Digest]
    }

    /// Bytes of a placement as both ``LogRecord/blobs(_:)`` and ``LogRecord/manifests(_:)`` encode it.
    static let placementSize = 57

    static func encode(_ placements: [ManifestPlacement], into writer: inout ByteWriter) {
        writer.append(UInt32(placements.count))
        for manifest in placements {
            writer.append(manifest.placement)
            writer.append(manifest.logicalSize == nil ? UInt8(0) : 1)
            writer.append(manifest.logicalSize ?? 0)
            writer.append(UInt32(manifest.children.count))
            for child in manifest.children { writer.append(child) }
        }
    }

    static func encode(time: UInt32, _ drops: [ManifestDrop], into writer: inout ByteWriter) {
        writer.append(time)
        writer.append(UInt32(drops.count))
        for drop in drops {
            writer.append(drop.digest)
            writer.append(UInt32(drop.children.count))
            for child in drop.children { writer.append(child) }
        }
    }

    static func decodeManifestPlacements(_ reader: inout ByteReader) throws -> [ManifestPlacement] {
        let count = Int(try reader.read(UInt32.self))
        guard count <= reader.remaining / (placementSize + 13) else { throw Malformed(description: "manifest count \(count) exceeds record") }
        var placements: [ManifestPlacement] = []
        placements.reserveCapacity(count)
        for _ in 0 ..< count {
            let placement = try reader.readPlacement()
            guard placement.manifest else { throw Malformed(description: "manifest placement of \(placement.digest) lacks the manifest flag") }
            let isRoot = try reader.read(UInt8.self)
            let size = try reader.read(UInt64.self)
            guard isRoot <= 1 else { throw Malformed(description: "unknown manifest kind \(isRoot)") }
            placements.append(ManifestPlacement(placement: placement, logicalSize: isRoot == 1 ? size : nil, children: try reader.readDigests()))
        }
        return placements
    }

    static func decodeManifestDrops(_ reader: inout ByteReader) throws -> LogRecord {
        let time = try reader.read(UInt32.self)
        let count = Int(try reader.read(UInt32.self))
        guard count <= reader.remaining / (Digest.byteCount + 4) else { throw Malformed(description: "drop count \(count) exceeds record") }
        var drops: [ManifestDrop] = []
        drops.reserveCapacity(count)
        for _ in 0 ..< count {
            let digest = try reader.readDigest()
            drops.append(ManifestDrop(digest: digest, children: try reader.readDigests()))
        }
        return .dropManifests(time: time, drops: drops)
    }
}

extension LogRecord.BlobPlacement {
    /// Flags of a placement in the log, the same bits as a pack entry header's (Docs/on-disk-format.md).
    static let compressedFlag: UInt8 = 1
    static let manifestFlag: UInt8 = 2
    /// Encoded bytes of a placement: digest, pack (u32), offset (u64), flags (u8), raw and stored
    /// lengths and time (u32 each).
    static let encodedSize = Digest.byteCount + 4 + 8 + 1 + 4 + 4 + 4
}

extension ByteWriter {
    mutating func append(_ placement: LogRecord.BlobPlacement) {
        append(placement.digest)
        append(placement.location.pack)
        append(placement.location.offset)
        append((placement.compressed ? LogRecord.BlobPlacement.compressedFlag : 0) | (placement.manifest ? LogRecord.BlobPlacement.manifestFlag : 0))
        append(placement.rawLength)
        append(placement.storedLength)
        append(placement.time)
    }
}

extension ByteReader {
    mutating func readPlacement() throws -> LogRecord.BlobPlacement {
        let digest = try readDigest()
        let pack = try read(UInt32.self)
        let offset = try read(UInt64.self)
        let flags = try read(UInt8.self)
        let raw = try read(UInt32.self)
        let stored = try read(UInt32.self)
        let time = try read(UInt32.self)
        guard flags & ~(LogRecord.BlobPlacement.compressedFlag | LogRecord.BlobPlacement.manifestFlag) == 0 else {
            throw LogRecord.Malformed(description: "unknown blob flags \(flags)")
        }
        // The index packs a location into 62 bits; a larger one is no location this store wrote.
        guard pack <= BlobEntry.maximumPackID, offset <= BlobEntry.maximumOffset else {
            throw LogRecord.Malformed(description: "blob location \(pack):\(offset) is out of range")
        }
        return LogRecord.BlobPlacement(
            digest: digest, location: BlobLocation(pack: pack, offset: offset), compressed: flags & LogRecord.BlobPlacement.compressedFlag != 0,
            rawLength: raw, storedLength: stored, time: time, manifest: flags & LogRecord.BlobPlacement.manifestFlag != 0)
    }

    /// A `u32` count and that many digests, the count checked against the bytes left first.
    mutating func readDigests() throws -> [Digest] {
        let count = Int(try read(UInt32.self))
        guard count <= remaining / Digest.byteCount else { throw LogRecord.Malformed(description: "digest count \(count) exceeds record") }
        var digests: [Digest] = []
        digests.reserveCapacity(count)
        for _ in 0 ..< count { digests.append(try readDigest()) }
        return digests
    }
}
