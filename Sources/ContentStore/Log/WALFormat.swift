/// The byte layout of WAL segments (see Docs/on-disk-format.md).
///
/// ```
/// segment header (32 bytes) magic "CSWALSEG" | u32 version | u32 salt | u64 segment number | u32 0 | u32 crc32c(0..<28)
/// record frame              u32 payload length | u32 masked crc32c(salt ++ type ++ payload) | u8 type | payload
/// ```
/// Types 1–3 and 5–7 are ``LogRecord`` kinds. Type 4 is a sync point: its 8-byte payload is the segment offset
/// below which everything was durable when the batch it starts was written.
/// The salt is random per segment, so bytes of another segment (or file) never pass for a record here.
enum WALFormat {
    static let version: UInt32 = 1
    static let headerSize = 32
    static let frameHeaderSize = 9
    static let magic: [UInt8] = Array("CSWALSEG".utf8)
    static let syncPointKind: UInt8 = 4
    /// Most pack bytes one batch carries (``LogRecord/packBytes(_:)``), whatever the limits: a frame
    /// of them must stay readable by a store opened with a smaller transaction limit.
    static let maximumPackBytes = 1 << 20

    static func fileName(_ number: UInt64) -> String { NumberedFileName.walSegment.name(number) }

    /// The number of the segment `name` names; nil for any other name (``NumberedFileName``).
    static func number(fromFileName name: String) -> UInt64? { NumberedFileName.walSegment.number(from: name) }

    static func header(number: UInt64, salt: UInt32) -> [UInt8] {
        FileHeader.encode(magic: magic, version: version, size: headerSize) { fields in
            fields.append(salt)
            fields.append(number)
            fields.append(UInt32(0))
        }
    }

    struct Header { var salt: UInt32; var number: UInt64 }

    /// Parses a segment header; nil when it is missing, torn or not a WAL header.
    static func parseHeader(_ bytes: UnsafeRawBufferPointer) -> Header? {
        guard bytes.count >= headerSize else { return nil }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[0 ..< headerSize]))
        guard let magicBytes = try? reader.readBytes(8), magicBytes.elementsEqual(magic),
              let version = try? reader.read(UInt32.self), version == WALFormat.version,
              let salt = try? reader.read(UInt32.self),
              let number = try? reader.read(UInt64.self),
              (try? reader.read(UInt32.self)) == 0,
              let crc = try? reader.read(UInt32.self),
              crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0 ..< 28]))
        else { return nil }
        return Header(salt: salt, number: number)
    }

    /// Appends a framed record to `buffer`.
    static func appendFrame(kind: UInt8, payload: [UInt8], salt: UInt32, to buffer: inout [UInt8]) {
        var crc = withUnsafeBytes(of: salt.littleEndian) { CRC32C.checksum($0) }
        crc = withUnsafeBytes(of: kind) { CRC32C.checksum($0, extending: crc) }
        crc = CRC32C.checksum(payload, extending: crc)
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { buffer.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.mask(crc).littleEndian) { buffer.append(contentsOf: $0) }
        buffer.append(kind)
        buffer.append(contentsOf: payload)
    }

    /// The frame at `offset` if it is complete and its checksum matches: (type, payload).
    ///
    /// No frame has an empty payload: zeros, as in the tail the writer extends the last segment by,
    /// are never a frame (for one salt in 2³² they would pass the checksum).
    static func frame(in bytes: UnsafeRawBufferPointer, at offset: Int, salt: UInt32, maximumPayload: Int) -> (kind: UInt8, payload: UnsafeRawBufferPointer)? {
        guard offset + frameHeaderSize <= bytes.count else { return nil }
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
        guard length > 0, length <= maximumPayload, offset + frameHeaderSize + length <= bytes.count else { return nil }
        let stored = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self).littleEndian
        let kind = bytes[offset + 8]
        let payload = UnsafeRawBufferPointer(rebasing: bytes[offset + frameHeaderSize ..< offset + frameHeaderSize + length])
        var crc = withUnsafeBytes(of: salt.littleEndian) { CRC32C.checksum($0) }
        crc = withUnsafeBytes(of: kind) { CRC32C.checksum($0, extending: crc) }
        crc = CRC32C.checksum(payload, extending: crc)
        guard CRC32C.mask(crc) == stored else { return nil }
        return (kind, payload)
    }
}
