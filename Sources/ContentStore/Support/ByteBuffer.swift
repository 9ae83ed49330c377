import Foundation

/// Little-endian encoder for the on-disk structures.
struct ByteWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    var count: Int { bytes.count }

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func append(_ digest: Digest) { digest.withUnsafeBytes { bytes.append(contentsOf: $0) } }
    mutating func append(contentsOf other: some Sequence<UInt8>) { bytes.append(contentsOf: other) }
    mutating func append(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }

    /// A `UInt32` length followed by the bytes.
    mutating func appendLengthPrefixed(_ data: some Collection<UInt8>) {
        append(UInt32(data.count))
        bytes.append(contentsOf: data)
    }
}

/// Bounds-checked little-endian decoder. Every read past the end throws, so a corrupt length can
/// never make the reader trap or allocate more than the input holds.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var position: Int = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    struct OutOfBounds: Error {}

    var remaining: Int { bytes.count - position }
    var isAtEnd: Bool { position == bytes.count }

    mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw OutOfBounds() }
        let value = T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
        position += size
        return value
    }

    mutating func readDigest() throws -> Digest {
        guard remaining >= Digest.byteCount else { throw OutOfBounds() }
        let digest = Digest(bytes: UnsafeRawBufferPointer(rebasing: bytes[position ..< position + Digest.byteCount]))
        position += Digest.byteCount
        return digest
    }

    mutating func readBytes(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw OutOfBounds() }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position ..< position + count])
    }

    /// Reads a `UInt32` length and that many bytes, refusing lengths above `limit` before touching them.
    mutating func readLengthPrefixed(limit: Int) throws -> UnsafeRawBufferPointer {
        let length = Int(try read(UInt32.self))
        guard length <= limit else { throw OutOfBounds() }
        return try readBytes(length)
    }
}
