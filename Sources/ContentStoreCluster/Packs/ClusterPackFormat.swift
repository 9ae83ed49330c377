import ContentStore
import Foundation

/// The bytes of a cluster pack object (Docs/cluster.md §2.2): the one place that writes or parses
/// them. All integers little-endian.
///
/// ```
/// entry header (56):  "CSBE" | codec u8 | 0 0 0 | digest[32] | logical u64 | stored u32 | crc32c u32
///                     followed by the stored bytes
/// index row (56):     digest[32] | entry offset u64 | logical u64 | stored u32 | codec u8 | 0 0 0
/// trailer (32):       "CSPK" | version u32 | entry count u32 | 0 u32 | index offset u64 |
///                     crc32c(index) u32 | crc32c(trailer[0..<28]) u32
/// ```
/// An entry can be read alone with one ranged GET of `[offset, offset + 56 + stored)`; the index and
/// trailer make a pack self-describing, so blob locations can be rebuilt from the bucket alone.
/// CRCs are CRC32C (Castagnoli) over the named bytes; the digest is SHA-256 of the uncompressed
/// bytes, checked by the reader after decompression.
enum ClusterPackFormat {
    static let entryMagic: [UInt8] = Array("CSBE".utf8)
    static let trailerMagic: [UInt8] = Array("CSPK".utf8)
    static let version: UInt32 = 1
    static let digestSize = 32
    static let entryHeaderSize = 56
    static let indexRowSize = 56
    static let trailerSize = 32
    /// Bytes of the trailer its own CRC covers.
    static let trailerCoveredSize = 28

    enum Codec: UInt8, Sendable {
        case raw = 0
        case zstd = 1
    }

    /// One blob as a pack holds it.
    struct Entry: Equatable, Sendable {
        var digest: [UInt8]
        var codec: Codec
        var logicalLength: UInt64
        var stored: [UInt8]
    }

    /// Where an entry is and what it holds, as the index (and `blobs` rows) record it.
    struct IndexRow: Equatable, Sendable {
        var digest: [UInt8]
        var entryOffset: UInt64
        var logicalLength: UInt64
        var storedLength: UInt32
        var codec: Codec
    }

    /// Appends entries, then seals the pack with its index and trailer.
    struct Builder {
        private var writer = ByteWriter()
        private(set) var index: [IndexRow] = []

        /// The pack so far.
        var bytes: [UInt8] { writer.bytes }

        init() {}

        /// A builder whose buffer is allocated once for a pack of about `capacity` bytes, so
        /// filling it never copies it to grow.
        init(reservingCapacity capacity: Int) {
            writer = ByteWriter(capacity: capacity)
        }

        /// Appends `entry`; returns its index row (its offset is what `blobs.pack_offset` stores).
        @discardableResult
        mutating func append(_ entry: Entry) -> IndexRow {
            precondition(entry.digest.count == digestSize, "a digest is \(digestSize) bytes")
            precondition(entry.stored.count <= Int(UInt32.max), "an entry's stored bytes fit a u32")
            let row = IndexRow(digest: entry.digest, entryOffset: UInt64(writer.count), logicalLength: entry.logicalLength,
                               storedLength: UInt32(entry.stored.count), codec: entry.codec)
            writer.append(contentsOf: entryMagic)
            writer.append(contentsOf: [entry.codec.rawValue, 0, 0, 0])
            writer.append(contentsOf: entry.digest)
            writer.append(entry.logicalLength)
            writer.append(UInt32(entry.stored.count))
            writer.append(CRC32C.checksum(entry.stored))
            writer.append(contentsOf: entry.stored)
            index.append(row)
            return row
        }

        /// The finished pack object.
        mutating func finish() -> [UInt8] {
            let indexOffset = UInt64(writer.count)
            for row in index {
                writer.append(contentsOf: row.digest)
                writer.append(row.entryOffset)
                writer.append(row.logicalLength)
                writer.append(row.storedLength)
                writer.append(contentsOf: [row.codec.rawValue, 0, 0, 0])
            }
            let indexCRC = CRC32C.checksum(writer.bytes[Int(indexOffset)...])
            let trailerStart = writer.count
            writer.append(contentsOf: trailerMagic)
            writer.append(version)
            writer.append(UInt32(index.count))
            writer.append(UInt32(0))
            writer.append(indexOffset)
            writer.append(indexCRC)
            writer.append(CRC32C.checksum(writer.bytes[trailerStart...]))
            return writer.bytes
        }
    }

    /// Parses one entry read alone (`bytes` starts at its header), checking magic, lengths and
    /// CRC. `expected` is the location the caller looked up; a mismatch is damage.
    static func parseEntry(_ bytes: [UInt8], expected: IndexRow, objectKey: String) throws -> Entry {
        let offset = expected.entryOffset
        guard bytes.count >= entryHeaderSize, Array(bytes[0..<4]) == entryMagic else {
            throw damaged("no entry header", objectKey: objectKey, offset: offset)
        }
        guard let codec = Codec(rawValue: bytes[4]) else {
            throw damaged("unknown codec \(bytes[4])", objectKey: objectKey, offset: offset)
        }
        let digest = Array(bytes[8..<40])
        let logical = read(UInt64.self, bytes, at: 40)
        let storedLength = read(UInt32.self, bytes, at: 48)
        let crc = read(UInt32.self, bytes, at: 52)
        guard digest == expected.digest, logical == expected.logicalLength, storedLength == expected.storedLength,
              codec == expected.codec else {
            throw damaged("entry header does not match its index row", objectKey: objectKey, offset: offset)
        }
        guard bytes.count == entryHeaderSize + Int(storedLength) else {
            throw damaged("entry of \(bytes.count) bytes, header says \(entryHeaderSize + Int(storedLength))", objectKey: objectKey, offset: offset)
        }
        let stored = Array(bytes[entryHeaderSize...])
        guard CRC32C.checksum(stored[...]) == crc else {
            throw damaged("entry checksum mismatch", objectKey: objectKey, offset: offset)
        }
        return Entry(digest: digest, codec: codec, logicalLength: logical, stored: stored)
    }

    /// Parses a whole pack's trailer and index, checking both CRCs and that every row lies inside
    /// the entries area.
    static func parseIndex(_ pack: [UInt8], objectKey: String) throws -> [IndexRow] {
        guard pack.count >= trailerSize else {
            throw damaged("pack of \(pack.count) bytes has no trailer", objectKey: objectKey, offset: 0)
        }
        let start = pack.count - trailerSize
        let trailerOffset = UInt64(start)
        guard Array(pack[start..<start + 4]) == trailerMagic else {
            throw damaged("no pack trailer", objectKey: objectKey, offset: trailerOffset)
        }
        guard CRC32C.checksum(pack[start..<start + trailerCoveredSize]) == read(UInt32.self, pack, at: start + trailerCoveredSize) else {
            throw damaged("trailer checksum mismatch", objectKey: objectKey, offset: trailerOffset)
        }
        let packVersion = read(UInt32.self, pack, at: start + 4)
        guard packVersion == version else {
            throw StoreError(code: .unsupportedFormat, message: "pack \(objectKey) is format version \(packVersion); this library reads \(version)",
                             path: objectKey)
        }
        let count = Int(read(UInt32.self, pack, at: start + 8))
        let indexOffset = read(UInt64.self, pack, at: start + 16)
        guard indexOffset <= UInt64(start), UInt64(start) - indexOffset == UInt64(count) * UInt64(indexRowSize) else {
            throw damaged("index of \(count) rows does not fit before the trailer", objectKey: objectKey, offset: trailerOffset)
        }
        let indexBytes = pack[Int(indexOffset)..<start]
        guard CRC32C.checksum(indexBytes) == read(UInt32.self, pack, at: start + 24) else {
            throw damaged("index checksum mismatch", objectKey: objectKey, offset: indexOffset)
        }
        var rows: [IndexRow] = []
        rows.reserveCapacity(count)
        for position in stride(from: Int(indexOffset), to: start, by: indexRowSize) {
            let rowOffset = UInt64(position)
            guard let codec = Codec(rawValue: pack[position + 52]) else {
                throw damaged("index row with unknown codec", objectKey: objectKey, offset: rowOffset)
            }
            let row = IndexRow(digest: Array(pack[position..<position + digestSize]),
                               entryOffset: read(UInt64.self, pack, at: position + 32),
                               logicalLength: read(UInt64.self, pack, at: position + 40),
                               storedLength: read(UInt32.self, pack, at: position + 48), codec: codec)
            guard row.entryOffset + UInt64(entryHeaderSize) + UInt64(row.storedLength) <= indexOffset else {
                throw damaged("index row points past the entries", objectKey: objectKey, offset: rowOffset)
            }
            rows.append(row)
        }
        return rows
    }

    private static func read<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes[offset..<offset + MemoryLayout<T>.size]) }
        return T(littleEndian: value)
    }

    private static func damaged(_ problem: String, objectKey: String, offset: UInt64) -> StoreError {
        StoreError(code: .corrupted, message: "\(problem) in pack \(objectKey) at offset \(offset)", path: objectKey, offset: offset)
    }
}
