/// What every file of a store starts with, and how the numbered ones are named: the one place the
/// four formats (FORMAT, WAL segments, packs, checkpoints; Docs/on-disk-format.md) share this.
///
/// ```
/// header   magic[8] | u32 format version | the file's own fields | u32 crc32c(every byte before it)
/// name     the number in lowercase hex, zero-padded to a fixed width, then the file's extension
/// ```
enum FileHeader {
    /// Bytes of a magic.
    static let magicSize = 8
    /// Bytes of the checksum that ends a header.
    static let checksumSize = 4

    /// A header of `magic`, `version`, the fields `writeFields` appends, and the checksum.
    static func encode(magic: [UInt8], version: UInt32, size: Int, _ writeFields: (inout ByteWriter) -> Void) -> [UInt8] {
        precondition(magic.count == magicSize, "a magic is 8 bytes")
        var writer = ByteWriter(capacity: size)
        writer.append(contentsOf: magic)
        writer.append(version)
        writeFields(&writer)
        writer.append(CRC32C.checksum(writer.bytes))
        precondition(writer.count == size, "a header's fields fill its size")
        return writer.bytes
    }

    /// Whether `bytes` (a whole header of its format's size) starts with `magic` and ends with the
    /// checksum of what comes before.
    static func isIntact(_ bytes: UnsafeRawBufferPointer, magic: [UInt8]) -> Bool {
        guard bytes.count >= magicSize + checksumSize, bytes.prefix(magicSize).elementsEqual(magic) else { return false }
        let end = bytes.count - checksumSize
        return bytes.loadUnaligned(fromByteOffset: end, as: UInt32.self).littleEndian
            == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0 ..< end]))
    }
}

/// Names of numbered files: `<number in hex, zero-padded to digits>.<extension>`.
struct NumberedFileName: Sendable {
    let digits: Int
    let fileExtension: String

    static let walSegment = NumberedFileName(digits: 16, fileExtension: "log")
    static let pack = NumberedFileName(digits: 8, fileExtension: "pack")
    static let checkpoint = NumberedFileName(digits: 16, fileExtension: "ckpt")

    func name(_ number: UInt64) -> String {
        let hex = String(number, radix: 16)
        return String(repeating: "0", count: max(0, digits - hex.count)) + hex + "." + fileExtension
    }

    /// The number `name` names; nil for any other name, including other spellings of a number
    /// (`UInt64(_:radix:)` also takes a sign and capitals): they are not the store's files.
    func number(from name: String) -> UInt64? {
        guard let number = UInt64(name.prefix(digits), radix: 16), name == self.name(number) else { return nil }
        return number
    }
}
