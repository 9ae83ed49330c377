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

    package mutating func append(_ digest: Digest) { digest.withUnsafeBytes { bytes.append(contentsOf: $0) } }
    package mutating func append(contentsOf other: some Sequence<UInt8>) { bytes.append(contentsOf: other) }
    package mutating func append(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }

    /// A `UInt32` length followed by the bytes.
    package mutating func appendLengthPrefixed(_ data: some Collection<UInt8>) {
        append(UInt32(data.count))
        bytes.append(contentsOf: data)
    }

    package mutating func overwrite<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (i, byte) in raw.enumerated() { bytes[offset + i] = byte }
        }
    }
}

/// Bounds-checked little-endian decoder. Every read past the end throws, so a corrupt length can
/// never make the reader trap or allocate more than the input holds.
package struct ByteReader {
    package let bytes: UnsafeRawBufferPointer
    private(set) var position: Int = 0

    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    package struct OutOfBounds: Error {}

    package var remaining: Int { bytes.count - position }
    package var isAtEnd: Bool { position == bytes.count }

    package mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw OutOfBounds() }
        let value = T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
        position += size
        return value
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
}
