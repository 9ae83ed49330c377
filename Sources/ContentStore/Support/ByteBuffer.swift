// Owns: the byte coding of every engine and facade format, so that one encoder and one
// bounds-checked decoder serve them all. Two integer codings: fixed-width little-endian (the
// engine's formats, Persist, Sync, StateLens, DataArchive) and unsigned LEB128 varints (Warehouse's
// records, Docs/warehouse.md). A format picks one; neither may change, since stored bytes depend on it.
import Foundation

/// Little-endian encoder for the on-disk structures.
package struct ByteWriter {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package var count: Int { bytes.count }

    package mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    // Concrete overloads of the generic members, which other modules call unspecialized (a
    // witness-table call per byte or per field): the facades encode a record per change with these.
    package mutating func append(_ value: UInt8) { bytes.append(value) }
    package mutating func append(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    package mutating func append(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }

    package mutating func append(_ digest: Digest) { digest.withUnsafeBytes { bytes.append(contentsOf: $0) } }
    package mutating func append(contentsOf other: some Sequence<UInt8>) { bytes.append(contentsOf: other) }
    package mutating func append(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }

    /// A `UInt32` length followed by the bytes.
    package mutating func appendLengthPrefixed(_ data: some Collection<UInt8>) {
        append(UInt32(data.count))
        bytes.append(contentsOf: data)
    }

    package mutating func appendLengthPrefixed(_ data: Data) {
        append(UInt32(data.count))
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    package mutating func appendLengthPrefixed(_ raw: [UInt8]) {
        append(UInt32(raw.count))
        bytes.append(contentsOf: raw)
    }

    /// A string's UTF-8 bytes, length first, copied without an intermediate array.
    package mutating func appendLengthPrefixed(_ utf8: String.UTF8View) {
        append(UInt32(utf8.count))
        if utf8.withContiguousStorageIfAvailable({ bytes.append(contentsOf: $0) }) == nil { bytes.append(contentsOf: utf8) }
    }

    /// `value` as an unsigned LEB128 varint: seven bits a byte, least significant group first, the
    /// high bit set on every byte but the last (300 is `AC 02`); 1 to 10 bytes.
    package mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A varint length (``appendVarint(_:)``) followed by the bytes.
    package mutating func appendVarintPrefixed(_ data: some Collection<UInt8>) {
        appendVarint(UInt64(data.count))
        bytes.append(contentsOf: data)
    }
}

/// Bounds-checked little-endian decoder. Every read past the end throws, so a corrupt length can
/// never make the reader trap or allocate more than the input holds.
package struct ByteReader {
    package let bytes: UnsafeRawBufferPointer
    package private(set) var position: Int = 0

    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    package struct OutOfBounds: Error { package init() {} }

    package var remaining: Int { bytes.count - position }
    package var isAtEnd: Bool { position == bytes.count }

    package mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw OutOfBounds() }
        let value = T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
        position += size
        return value
    }

    // Concrete overloads of `read`, which other modules call unspecialized (see ByteWriter's).
    package mutating func read(_: UInt8.Type = UInt8.self) throws -> UInt8 {
        guard remaining >= 1 else { throw OutOfBounds() }
        defer { position += 1 }
        return bytes[position]
    }

    package mutating func read(_: UInt32.Type = UInt32.self) throws -> UInt32 {
        guard remaining >= 4 else { throw OutOfBounds() }
        defer { position += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
    }

    package mutating func read(_: UInt64.Type = UInt64.self) throws -> UInt64 {
        guard remaining >= 8 else { throw OutOfBounds() }
        defer { position += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    package mutating func readDigest() throws -> Digest {
        guard remaining >= Digest.byteCount else { throw OutOfBounds() }
        let digest = Digest(bytes: UnsafeRawBufferPointer(rebasing: bytes[position ..< position + Digest.byteCount]))
        position += Digest.byteCount
        return digest
    }

    package mutating func readBytes(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw OutOfBounds() }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position ..< position + count])
    }

    /// Reads a `UInt32` length and that many bytes, refusing lengths above `limit` before touching them.
    package mutating func readLengthPrefixed(limit: Int) throws -> UnsafeRawBufferPointer {
        let length = Int(try read(UInt32.self))
        guard length <= limit else { throw OutOfBounds() }
        return try readBytes(length)
    }

    /// A varint that does not fit in 64 bits.
    package struct VarintOverflow: Error { package init() {} }

    /// Reads an unsigned LEB128 varint (``ByteWriter/appendVarint(_:)``). Throws `OutOfBounds` when
    /// the input ends inside it and `VarintOverflow` when it exceeds `UInt64.max`.
    package mutating func readVarint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next: UInt8 = try read()
            guard shift < 63 || (shift == 63 && next <= 1) else { throw VarintOverflow() }
            value |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return value }
            shift += 7
        }
    }
}
