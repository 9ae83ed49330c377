/// `<store>/FORMAT`: magic "CSTORE\0\0" | u32 format version | u32 flags (0) | u32 crc32c(0..<16).
enum FormatFile {
    static let version: UInt32 = 1
    static let magic: [UInt8] = Array("CSTORE\0\0".utf8)
    /// Larger than any FORMAT file: a small stranger is refused by ``check(_:path:)`` as not a
    /// store, a huge (sparse) one before it is read.
    static let maximumFileSize: UInt64 = 4096
    /// Magic, version, flags and checksum.
    static let size = 20

    static func encoded() -> [UInt8] {
        FileHeader.encode(magic: magic, version: version, size: size) { flags in flags.append(UInt32(0)) }
    }

    static func check(_ bytes: [UInt8], path: String) throws {
        guard bytes.count == size, bytes[0 ..< FileHeader.magicSize].elementsEqual(magic) else {
            throw StoreError(code: .unsupportedFormat, message: "\(path) is not a ContentStore FORMAT file", path: path)
        }
        let (found, intact) = bytes.withUnsafeBytes { raw in
            (raw.loadUnaligned(fromByteOffset: FileHeader.magicSize, as: UInt32.self).littleEndian, FileHeader.isIntact(raw, magic: magic))
        }
        guard intact else { throw StoreError.corrupted("FORMAT fails its checksum", path: path, offset: 0) }
        guard found <= version else {
            throw StoreError(
                code: .unsupportedFormat,
                message: "the store at \(path) has format version \(found); this build reads up to \(version)", path: path)
        }
    }
}
