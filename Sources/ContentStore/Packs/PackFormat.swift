/// The byte layout of pack files (see Docs/on-disk-format.md).
///
/// ```
/// pack header (32 bytes)  magic "CSPACK\0\0" | u32 version | u32 pack id | u64 created (ms) | u32 0 | u32 crc32c(0..<28)
/// entry header (56 bytes) u32 magic "CSBE" | u8 flags (bit 0 zstd, bit 1 manifest node, bit 2 dictionary, bit 3 uses a dictionary)
///                         | 3 × 0 | digest[32] | u32 raw length | u32 stored length | u32 put time (s) | u32 crc32c(header 0..<52 ++ payload)
/// entry payload           stored length bytes (zstd frame when flags bit 0 is set, else raw); with bit 3,
///                         u64 offset of the dictionary entry in this pack, then the zstd frame
/// index (sealed packs)    per entry: digest[32] | u64 offset | u32 raw length | u32 stored length
/// footer (32 bytes)       magic "CSPACKIX" | u64 index offset | u32 entry count | u32 0 | u32 crc32c(index) | u32 crc32c(footer 0..<28)
/// ```
enum PackFormat {
    static let version: UInt32 = 1
    static let headerSize = 32
    static let entryHeaderSize = 56
    static let indexEntrySize = 48
    static let footerSize = 32
    static let headerMagic: [UInt8] = Array("CSPACK\0\0".utf8)
    static let footerMagic: [UInt8] = Array("CSPACKIX".utf8)
    static let entryMagic: UInt32 = 0x4542_5343  // "CSBE" little-endian
    static let compressedFlag: UInt8 = 1
    /// The payload is a manifest node (Chunking/ManifestNode.swift), not blob bytes.
    static let manifestFlag: UInt8 = 2
    /// The entry holds a zstd dictionary (its digest is the dictionary's SHA-256), not a blob: the
    /// index never points at it; entries of the same pack that use it name it by offset.
    static let dictionaryFlag: UInt8 = 4
    /// The payload is the offset (u64) of a dictionary entry in the same pack, then a zstd frame
    /// compressed with that dictionary. Always with ``compressedFlag``.
    static let usesDictionaryFlag: UInt8 = 8
    /// Bytes before the frame in the payload of an entry that uses a dictionary.
    static let dictionaryReferenceSize = 8
    /// No dictionary entry is longer: more than zstd's trainer is asked for, and a bound a damaged
    /// header cannot push a read past.
    static let maximumDictionarySize = 1 << 20

    static func fileName(_ id: UInt32) -> String { NumberedFileName.pack.name(UInt64(id)) }

    /// The id of the pack `name` names; nil for any other name (``NumberedFileName``).
    static func id(fromFileName name: String) -> UInt32? {
        NumberedFileName.pack.number(from: name).flatMap { UInt32(exactly: $0) }
    }

    static func header(id: UInt32, createdMilliseconds: UInt64) -> [UInt8] {
        FileHeader.encode(magic: headerMagic, version: version, size: headerSize) { fields in
            fields.append(id)
            fields.append(createdMilliseconds)
            fields.append(UInt32(0))
        }
    }

    struct EntryHeader: Equatable {
        var flags: UInt8
        var digest: Digest
        var rawLength: UInt32
        var storedLength: UInt32
        var time: UInt32
        var checksum: UInt32

        var isCompressed: Bool { flags & compressedFlag != 0 }
        var isManifest: Bool { flags & manifestFlag != 0 }
        var isDictionary: Bool { flags & dictionaryFlag != 0 }
        var usesDictionary: Bool { flags & usesDictionaryFlag != 0 }
        var totalLength: UInt64 { UInt64(PackFormat.entryHeaderSize) + UInt64(storedLength) }
    }

    /// The 56-byte header for an entry, with the CRC over header and payload filled in.
    static func entryHeader(digest: Digest, compressed: Bool, manifest: Bool = false, rawLength: UInt32, payload: UnsafeRawBufferPointer, time: UInt32) -> [UInt8] {
        entryHeader(digest: digest, flags: (compressed ? compressedFlag : 0) | (manifest ? manifestFlag : 0), rawLength: rawLength, payload: payload, time: time)
    }

    /// The header of an entry compressed with the dictionary entry at `dictionaryOffset` of the same
    /// pack, and the payload's 8-byte prefix naming it; `frame` follows the prefix.
    static func dictionaryCompressedEntry(digest: Digest, rawLength: UInt32, dictionaryOffset: UInt64, frame: UnsafeRawBufferPointer,
                                          time: UInt32) -> (header: [UInt8], prefix: [UInt8]) {
        var prefix = ByteWriter(capacity: dictionaryReferenceSize)
        prefix.append(dictionaryOffset)
        let header = prefix.bytes.withUnsafeBytes { reference in
            entryHeader(digest: digest, flags: compressedFlag | usesDictionaryFlag, rawLength: rawLength, payload: [reference, frame], time: time)
        }
        return (header, prefix.bytes)
    }

    private static func entryHeader(digest: Digest, flags: UInt8, rawLength: UInt32, payload: UnsafeRawBufferPointer, time: UInt32) -> [UInt8] {
        entryHeader(digest: digest, flags: flags, rawLength: rawLength, payload: [payload], time: time)
    }

    /// `payload` in pieces, so a prefix need not be copied in front of a frame to checksum them.
    static func entryHeader(digest: Digest, flags: UInt8, rawLength: UInt32, payload: [UnsafeRawBufferPointer], time: UInt32) -> [UInt8] {
        var writer = ByteWriter(capacity: entryHeaderSize)
        writer.append(entryMagic)
        writer.append(flags)
        writer.append(contentsOf: [0, 0, 0] as [UInt8])
        writer.append(digest)
        writer.append(rawLength)
        writer.append(UInt32(payload.reduce(0) { $0 + $1.count }))
        writer.append(time)
        let crc = payload.reduce(CRC32C.checksum(writer.bytes)) { CRC32C.checksum($1, extending: $0) }
        writer.append(crc)
        return writer.bytes
    }

    struct Malformed: Error { var reason: String }

    static func parseEntryHeader(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> EntryHeader {
        var reader = ByteReader(bytes)
        do {
            guard try reader.read(UInt32.self) == entryMagic else { throw Malformed(reason: "bad entry magic") }
            let flags = try reader.read(UInt8.self)
            _ = try reader.readBytes(3)
            let digest = try reader.readDigest()
            let raw = try reader.read(UInt32.self)
            let stored = try reader.read(UInt32.self)
            let time = try reader.read(UInt32.self)
            let checksum = try reader.read(UInt32.self)
            guard flags & ~(compressedFlag | manifestFlag | dictionaryFlag | usesDictionaryFlag) == 0,
                  // A dictionary is no blob, and a frame that uses one is a compressed blob.
                  flags & dictionaryFlag == 0 || flags & (manifestFlag | usesDictionaryFlag) == 0,
                  flags & usesDictionaryFlag == 0 || (flags & compressedFlag != 0 && stored >= UInt32(dictionaryReferenceSize))
            else { throw Malformed(reason: "unknown entry flags \(flags)") }
            return EntryHeader(flags: flags, digest: digest, rawLength: raw, storedLength: stored, time: time, checksum: checksum)
        } catch let error as Malformed {
            throw error
        } catch {
            throw Malformed(reason: "truncated entry header")
        }
    }

    /// Whether `header.checksum` matches the header bytes and `payload`.
    static func checksumMatches(header bytes: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) -> Bool {
        let headerPart = UnsafeRawBufferPointer(rebasing: bytes[0 ..< entryHeaderSize - 4])
        let stored = bytes.loadUnaligned(fromByteOffset: entryHeaderSize - 4, as: UInt32.self).littleEndian
        return CRC32C.checksum(payload, extending: CRC32C.checksum(headerPart)) == stored
    }

    struct IndexEntry: Equatable {
        var digest: Digest
        var offset: UInt64
        var rawLength: UInt32
        var storedLength: UInt32
    }

    /// Index and footer appended when a pack is sealed.
    static func trailer(_ entries: [IndexEntry], indexOffset: UInt64) -> [UInt8] {
        var index = ByteWriter(capacity: entries.count * indexEntrySize + footerSize)
        for entry in entries {
            index.append(entry.digest)
            index.append(entry.offset)
            index.append(entry.rawLength)
            index.append(entry.storedLength)
        }
        var footer = ByteWriter(capacity: footerSize)
        footer.append(contentsOf: footerMagic)
        footer.append(indexOffset)
        footer.append(UInt32(entries.count))
        footer.append(UInt32(0))
        footer.append(CRC32C.checksum(index.bytes))
        footer.append(CRC32C.checksum(footer.bytes))
        index.append(contentsOf: footer.bytes)
        return index.bytes
    }
}
