#if canImport(Glibc)
import Glibc
#endif
@testable import ContentStore

/// Limits smaller than the defaults, so that the fuzzers' malloc limit (`-malloc_limit_mb`) catches
/// any allocation a hostile file could make beyond what the limits allow.
public let fuzzLimits: Store.Limits = {
    var limits = Store.Limits()
    limits.maximumBlobSize = 8 << 20
    limits.maximumTransactionSize = 4 << 20
    limits.maximumValueLength = 1 << 20
    limits.maximumKeyLength = 1024
    return limits
}()

/// Inputs start with a flags byte; the rest is the file.
public struct FuzzInput {
    public var flags: UInt8
    public var file: [UInt8]

    public init(_ data: UnsafeRawBufferPointer) {
        flags = data.first ?? 0
        file = data.count > 1 ? Array(data[1...]) : []
    }

    public func flag(_ bit: Int) -> Bool { flags & (1 << bit) != 0 }
}

func load32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
    bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian }
}

func store32(_ value: UInt32, into bytes: inout [UInt8], at offset: Int) {
    withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(offset ..< offset + 4, with: $0) }
}

/// Recomputes the checksums of a WAL segment (header, then every frame as its length field walks),
/// so that mutations reach the record decoder and the state they are applied to instead of
/// stopping at the checksum, as a forged file would.
public func repairWALChecksums(_ bytes: inout [UInt8]) {
    guard bytes.count >= WALFormat.headerSize else { return }
    store32(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0 ..< 28])) }, into: &bytes, at: 28)
    let salt = load32(bytes, 12)
    var offset = WALFormat.headerSize
    while offset + WALFormat.frameHeaderSize <= bytes.count {
        let length = Int(load32(bytes, offset))
        guard offset + WALFormat.frameHeaderSize + length <= bytes.count else { return }
        let kind = bytes[offset + 8]
        let payload = Array(bytes[offset + WALFormat.frameHeaderSize ..< offset + WALFormat.frameHeaderSize + length])
        var framed: [UInt8] = []
        WALFormat.appendFrame(kind: kind, payload: payload, salt: salt, to: &framed)
        bytes.replaceSubrange(offset ..< offset + framed.count, with: framed)
        offset += framed.count
    }
}

/// Recomputes a checkpoint's header, frame and end-frame checksums (and the end frame's length).
public func repairCheckpointChecksums(_ bytes: inout [UInt8]) {
    guard bytes.count >= Checkpoint.headerSize else { return }
    store32(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0 ..< 36])) }, into: &bytes, at: 36)
    var offset = Checkpoint.headerSize
    var body: UInt64 = 0
    while offset + 8 <= bytes.count {
        let length = Int(load32(bytes, offset))
        if length == 0 {
            guard offset + 16 <= bytes.count else { return }
            withUnsafeBytes(of: body.littleEndian) { bytes.replaceSubrange(offset + 8 ..< offset + 16, with: $0) }
            let crc = bytes.withUnsafeBytes { CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[offset + 8 ..< offset + 16]))) }
            store32(crc, into: &bytes, at: offset + 4)
            return
        }
        guard offset + 8 + length <= bytes.count else { return }
        let crc = bytes.withUnsafeBytes { CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[offset + 8 ..< offset + 8 + length]))) }
        store32(crc, into: &bytes, at: offset + 4)
        body += UInt64(length)
        offset += 8 + length
    }
}

/// Recomputes a pack's header checksum, every entry's checksum (walking the entry headers), and,
/// when the file ends in a footer, the index and footer checksums.
public func repairPackChecksums(_ bytes: inout [UInt8]) {
    guard bytes.count >= PackFormat.headerSize else { return }
    store32(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0 ..< 28])) }, into: &bytes, at: 28)
    var end = bytes.count
    if bytes.count >= PackFormat.headerSize + PackFormat.footerSize {
        let footer = bytes.count - PackFormat.footerSize
        if bytes[footer ..< footer + 8].elementsEqual(PackFormat.footerMagic) {
            let indexOffset = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: footer + 8, as: UInt64.self).littleEndian }
            if indexOffset <= UInt64(footer) {
                end = Int(indexOffset)
                store32(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[end ..< footer])) }, into: &bytes, at: footer + 24)
                store32(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[footer ..< footer + 28])) }, into: &bytes, at: footer + 28)
            }
        }
    }
    var offset = PackFormat.headerSize
    while offset + PackFormat.entryHeaderSize <= end {
        let stored = Int(load32(bytes, offset + 44))
        guard offset + PackFormat.entryHeaderSize + stored <= end else { return }
        let crc = bytes.withUnsafeBytes { raw in
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[offset + PackFormat.entryHeaderSize ..< offset + PackFormat.entryHeaderSize + stored]),
                            extending: CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + 52])))
        }
        store32(crc, into: &bytes, at: offset + 52)
        offset += PackFormat.entryHeaderSize + stored
    }
}

/// A read-only ``File`` whose bytes are held in memory, for the pack reader to walk.
public func memoryFile(_ bytes: [UInt8], path: String = "fuzz.pack") -> File {
    File(descriptor: 0, path: path, io: MemoryFileIO(bytes))
}

final class MemoryFileIO: FileIO, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    private static let unsupported = SystemError("fuzz", errno: EROFS)
    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError> { .failure(Self.unsupported) }
    func close(_ descriptor: Int32) {}
    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        guard offset < UInt64(bytes.count) else { return .success(0) }
        let count = min(buffer.count, bytes.count - Int(offset))
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[Int(offset) ..< Int(offset) + count])) }
        return .success(count)
    }
    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> { .failure(Self.unsupported) }
    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func fsync(_ descriptor: Int32) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func size(_ descriptor: Int32) -> Result<UInt64, SystemError> { .success(UInt64(bytes.count)) }
    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError> { .failure(Self.unsupported) }
    func rename(_ source: String, to destination: String) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func unlink(_ path: String) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError> { .failure(Self.unsupported) }
    func contents(ofDirectory path: String) -> Result<[String], SystemError> { .failure(Self.unsupported) }
    func kind(of path: String) -> FileKind { .missing }
}
