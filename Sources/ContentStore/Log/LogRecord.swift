import Foundation

/// A change to the store as the WAL carries it. Replay applies these in order to the checkpoint's
/// state; live operations apply the same values through the same code (``StoreState``).
enum LogRecord: Equatable {
    /// A committed transaction: the full new record of each key it changed (nil = removed).
    case commit(Commit)
    /// Blobs written to packs, or moved between packs by collection.
    case blobs([BlobPlacement])
    /// Blobs dropped by collection.
    case drop(time: UInt32, digests: [Digest])
    /// Pack bytes a commit needed that were not synced: the log carries them in place of a pack sync,
    /// and recovery writes them back to a pack that lost them (Docs/durability.md).
    case packBytes(PackBytes)
    /// New manifest nodes of chunked blobs, each with the children it references (LogRecord+Manifests.swift).
    case manifests([ManifestPlacement])
    /// Manifest nodes dropped by collection, each with the children it held references to.
    case dropManifests(time: UInt32, drops: [ManifestDrop])

    struct Commit: Equatable {
        var sequence: UInt64
        var time: UInt32
        var changes: [Change]
    }

    struct Change: Equatable {
        var key: String
        var record: Record?

        /// Encoded bytes of a change that sets a record, beyond its key, value and references: the
        /// change type (u8), the key's and the value's lengths and the reference count (u32 each).
        static let setOverhead = 1 + 4 + 4 + 4
        /// Encoded bytes of a removal beyond its key: the change type and the key's length.
        static let removalOverhead = 1 + 4
    }

    struct BlobPlacement: Equatable {
        var digest: Digest
        var location: BlobLocation
        var compressed: Bool
        var rawLength: UInt32
        var storedLength: UInt32
        var time: UInt32
        /// The entry is a manifest node (only ever true for a blob collection moves).
        var manifest = false
    }

    struct PackBytes: Equatable {
        var pack: UInt32
        var offset: UInt64
        var bytes: [UInt8]

        /// The bytes a frame of them takes beyond `bytes`: frame header, pack, offset, length.
        static let overhead = WALFormat.frameHeaderSize + 4 + 8 + 4
    }

    /// Frame types; 4 is the WAL's sync point (``WALFormat/syncPointKind``).
    enum Kind: UInt8 {
        case commit = 1, blobs = 2, drop = 3, packBytes = 5, manifests = 6, dropManifests = 7
    }

    var kind: Kind {
        switch self {
        case .commit: .commit
        case .blobs: .blobs
        case .drop: .drop
        case .packBytes: .packBytes
        case .manifests: .manifests
        case .dropManifests: .dropManifests
        }
    }

    /// The payload bytes (without the WAL frame).
    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        switch self {
        case .commit(let commit):
            writer.append(commit.sequence)
            writer.append(commit.time)
            writer.append(UInt32(commit.changes.count))
            for change in commit.changes {
                writer.append(change.record == nil ? UInt8(2) : UInt8(1))
                writer.appendLengthPrefixed(change.key.utf8)
                if let record = change.record {
                    writer.appendLengthPrefixed(record.value)
                    writer.append(UInt32(record.references.count))
                    for digest in record.references { writer.append(digest) }
                }
            }
        case .blobs(let placements):
            writer.append(UInt32(placements.count))
            for placement in placements { writer.append(placement) }
        case .drop(let time, let digests):
            writer.append(time)
            writer.append(UInt32(digests.count))
            for digest in digests { writer.append(digest) }
        case .packBytes(let logged):
            writer.append(logged.pack)
            writer.append(logged.offset)
            writer.appendLengthPrefixed(logged.bytes)
        case .manifests(let placements):
            Self.encode(placements, into: &writer)
        case .dropManifests(let time, let drops):
            Self.encode(time: time, drops, into: &writer)
        }
        return writer.bytes
    }

    struct Malformed: Error, CustomStringConvertible { var description: String }

    /// Decodes a payload. Every count is checked against the bytes that remain before anything is
    /// allocated, so a corrupt count cannot exhaust memory.
    static func decode(kind rawKind: UInt8, payload: UnsafeRawBufferPointer, limits: Store.Limits) throws(Malformed) -> LogRecord {
        guard let kind = Kind(rawValue: rawKind) else { throw Malformed(description: "unknown record type \(rawKind)") }
        var reader = ByteReader(payload)
        do {
            let record: LogRecord
            switch kind {
            case .commit:
                let sequence = try reader.read(UInt64.self)
                let time = try reader.read(UInt32.self)
                let count = Int(try reader.read(UInt32.self))
                guard count <= reader.remaining / 5 else { throw Malformed(description: "change count \(count) exceeds record") }
                var changes: [Change] = []
                changes.reserveCapacity(count)
                for _ in 0 ..< count {
                    let op = try reader.read(UInt8.self)
                    let keyBytes = try reader.readLengthPrefixed(limit: limits.maximumKeyLength)
                    guard let key = String(validating: keyBytes, as: UTF8.self) else { throw Malformed(description: "key is not UTF-8") }
                    switch op {
                    case 1:
                        let value = Data(try reader.readLengthPrefixed(limit: limits.maximumValueLength))
                        let referenceCount = Int(try reader.read(UInt32.self))
                        guard referenceCount <= reader.remaining / Digest.byteCount else {
                            throw Malformed(description: "reference count \(referenceCount) exceeds record")
                        }
                        var references: [Digest] = []
                        references.reserveCapacity(referenceCount)
                        for _ in 0 ..< referenceCount { references.append(try reader.readDigest()) }
                        changes.append(Change(key: key, record: Record(value: value, references: references)))
                    case 2:
                        changes.append(Change(key: key, record: nil))
                    default:
                        throw Malformed(description: "unknown change type \(op)")
                    }
                }
                record = .commit(Commit(sequence: sequence, time: time, changes: changes))
            case .blobs:
                let count = Int(try reader.read(UInt32.self))
                guard count <= reader.remaining / BlobPlacement.encodedSize else { throw Malformed(description: "blob count \(count) exceeds record") }
                var placements: [BlobPlacement] = []
                placements.reserveCapacity(count)
                for _ in 0 ..< count { placements.append(try reader.readPlacement()) }
                record = .blobs(placements)
            case .drop:
                let time = try reader.read(UInt32.self)
                let count = Int(try reader.read(UInt32.self))
                guard count <= reader.remaining / Digest.byteCount else { throw Malformed(description: "drop count \(count) exceeds record") }
                var digests: [Digest] = []
                digests.reserveCapacity(count)
                for _ in 0 ..< count { digests.append(try reader.readDigest()) }
                record = .drop(time: time, digests: digests)
            case .packBytes:
                let pack = try reader.read(UInt32.self)
                let offset = try reader.read(UInt64.self)
                let bytes = Array(try reader.readLengthPrefixed(limit: WALFormat.maximumPackBytes))
                guard pack <= BlobEntry.maximumPackID, offset <= BlobEntry.maximumOffset - UInt64(bytes.count) else {
                    throw Malformed(description: "pack bytes at \(pack):\(offset) are out of range")
                }
                record = .packBytes(PackBytes(pack: pack, offset: offset, bytes: bytes))
            case .manifests:
                record = .manifests(try decodeManifestPlacements(&reader))
            case .dropManifests:
                record = try decodeManifestDrops(&reader)
            }
            guard reader.isAtEnd else { throw Malformed(description: "\(reader.remaining) trailing bytes") }
            return record
        } catch let error as Malformed {
            throw error
        } catch {
            throw Malformed(description: "record ends early")
        }
    }
}
