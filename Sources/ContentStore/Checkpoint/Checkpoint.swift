#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A snapshot of ``StoreState`` on disk, `<store>/checkpoint/<first segment>.ckpt`.
///
/// ```
/// header (40 bytes)  magic "CSCHKPNT" | u32 version | u32 0 | u64 first WAL segment to replay
///                    | u64 commit sequence | u32 0 | u32 crc32c(0..<36)
/// frames             u32 length (1...1 MiB) | u32 masked crc32c(payload) | payload
/// end frame          u32 0 | u32 masked crc32c(body length) | u64 body length
/// body (the frames' payloads concatenated)
///                    u64 blob count, then per blob: digest[32] | u64 packed location | u32 raw length
///                      | u32 stored length | u32 reference count | u32 zero-since
///                    u64 record count, then per record (ascending keys): u32 key length | key
///                      | u32 value length | value | u32 reference count | digests
///                    u64 referenced bytes (Σ over record references of the blob's size)
///                    u64 chunked blob count, then per chunked blob: digest[32] | u64 size
/// ```
/// Written to a temporary file, synced, renamed into place and the directory synced: a checkpoint
/// is either wholly present or absent.
enum Checkpoint {
    static let version: UInt32 = 1
    static let headerSize = 40
    static let frameSize = 1 << 20
    static let magic: [UInt8] = Array("CSCHKPNT".utf8)
    static let blobEntrySize = 56

    static func fileName(_ firstSegment: UInt64) -> String { NumberedFileName.checkpoint.name(firstSegment) }

    /// The first segment the checkpoint `name` names; nil for any other name, including other
    /// spellings of a number (`UInt64(_:radix:)` also takes a sign and capitals).
    static func firstSegment(fromFileName name: String) -> UInt64? {
        NumberedFileName.checkpoint.number(from: name)
    }

    struct Contents {
        var firstSegment: UInt64
        var state: StoreState
    }

    // MARK: Writing

    static func write(_ contents: Contents, directory: String, fileSystem: FileSystem) throws {
        let path = directory + "/" + fileName(contents.firstSegment)
        let temporary = path + ".tmp"
        let file = try fileSystem.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        var output = FrameWriter(file: file)
        try output.writeRaw(header(contents))
        let state = contents.state
        var body = ByteWriter(capacity: frameSize + 4096)
        func drain(_ force: Bool) throws {
            if force || body.count >= frameSize {
                try output.writeFrames(body.bytes)
                body = ByteWriter(capacity: frameSize + 4096)
            }
        }
        body.append(UInt64(state.blobs.count))
        for (digest, entry) in state.blobs.entries {
            body.append(digest)
            body.append(entry.packedLocation)
            body.append(entry.rawLength)
            body.append(entry.storedLength)
            body.append(entry.refCount)
            body.append(entry.zeroSince)
            try drain(false)
        }
        body.append(UInt64(state.records.count))
        for (key, record) in state.records {
            body.appendLengthPrefixed(key.utf8)
            body.appendLengthPrefixed(record.value)
            body.append(UInt32(record.references.count))
            for digest in record.references { body.append(digest) }
            try drain(false)
        }
        body.append(state.blobs.referencedLogicalBytes)
        body.append(UInt64(state.blobs.manifestSizes.count))
        for (digest, size) in state.blobs.manifestSizes {
            body.append(digest)
            body.append(size)
            try drain(false)
        }
        try drain(true)
        try output.finish()
        try file.synchronize()
        try fileSystem.rename(temporary, to: path)
        try fileSystem.synchronizeDirectory(directory)
    }

    private static func header(_ contents: Contents) -> [UInt8] {
        FileHeader.encode(magic: magic, version: version, size: headerSize) { fields in
            fields.append(UInt32(0))
            fields.append(contents.firstSegment)
            fields.append(contents.state.commitSequence)
            fields.append(UInt32(0))
        }
    }

    private struct FrameWriter {
        let file: File
        var offset: UInt64 = 0
        var bodyLength: UInt64 = 0

        mutating func writeRaw(_ bytes: [UInt8]) throws {
            try file.write(bytes, at: offset)
            offset += UInt64(bytes.count)
        }

        mutating func writeFrames(_ body: [UInt8]) throws {
            var start = 0
            while start < body.count {
                let end = min(body.count, start + Checkpoint.frameSize)
                let payload = body[start ..< end]
                var frame = ByteWriter(capacity: payload.count + 8)
                frame.append(UInt32(payload.count))
                frame.append(CRC32C.mask(payload.withUnsafeBytes { CRC32C.checksum($0) }))
                frame.append(contentsOf: payload)
                try writeRaw(frame.bytes)
                bodyLength += UInt64(payload.count)
                start = end
            }
        }

        mutating func finish() throws {
            var end = ByteWriter(capacity: 16)
            end.append(UInt32(0))
            end.append(CRC32C.mask(withUnsafeBytes(of: bodyLength.littleEndian) { CRC32C.checksum($0) }))
            end.append(bodyLength)
            try writeRaw(end.bytes)
        }
    }

    // MARK: Reading

    /// Loads a checkpoint file. Damage anywhere is `corrupted`, naming the file and the offset of the
    /// damaged header or frame.
    static func load(path: String, limits: Store.Limits, fileSystem: FileSystem) throws -> Contents {
        try decode(try fileSystem.open(path, flags: O_RDONLY), limits: limits)
    }

    /// Decodes a checkpoint file (any ``File``, so the fuzzer can hand it one in memory).
    ///
    /// Read frame by frame, each checked before the next is read, so memory grows with the frames
    /// that check out, never with the file's size: a sparse file claims any size on no disk space.
    static func decode(_ file: File, limits: Store.Limits) throws -> Contents {
        let path = file.path
        let size = try file.size()
        guard size >= UInt64(headerSize) else { throw StoreError.corrupted("checkpoint header is damaged", path: path, offset: 0) }
        let header = try file.readExactly(headerSize, at: 0)
        guard header[0 ..< 8].elementsEqual(magic), CRC32C.checksum(Array(header[0 ..< 36])) == load32(header, at: 36) else {
            throw StoreError.corrupted("checkpoint header is damaged", path: path, offset: 0)
        }
        let version = load32(header, at: 8)
        guard version == Checkpoint.version else {
            throw StoreError(code: .unsupportedFormat, message: "checkpoint version \(version) is not supported", path: path)
        }
        let firstSegment = load64(header, at: 16)
        let commitSequence = load64(header, at: 24)

        var body: [UInt8] = []
        var offset = UInt64(headerSize)
        while true {
            guard offset + 8 <= size else { throw StoreError.corrupted("checkpoint ends without its end frame", path: path, offset: offset) }
            let frameHeader = try file.readExactly(8, at: offset)
            let length = Int(load32(frameHeader, at: 0))
            let crc = load32(frameHeader, at: 4)
            if length == 0 {
                guard offset + 16 <= size else { throw StoreError.corrupted("checkpoint end frame is truncated", path: path, offset: offset) }
                let lengthBytes = try file.readExactly(8, at: offset + 8)
                guard CRC32C.mask(CRC32C.checksum(lengthBytes)) == crc, load64(lengthBytes, at: 0) == UInt64(body.count) else {
                    throw StoreError.corrupted("checkpoint end frame is damaged", path: path, offset: offset)
                }
                break
            }
            guard length <= frameSize, offset + 8 + UInt64(length) <= size else {
                throw StoreError.corrupted("checkpoint frame length \(length) is invalid", path: path, offset: offset)
            }
            let payload = try file.readExactly(length, at: offset + 8)
            guard CRC32C.mask(CRC32C.checksum(payload)) == crc else {
                throw StoreError.corrupted("checkpoint frame fails its checksum", path: path, offset: offset)
            }
            body.append(contentsOf: payload)
            offset += 8 + UInt64(length)
        }
        do {
            let state = try body.withUnsafeBytes { try decodeBody($0, commitSequence: commitSequence, limits: limits) }
            return Contents(firstSegment: firstSegment, state: state)
        } catch {
            throw StoreError.corrupted("checkpoint body does not parse (\(error))", path: path)
        }
    }

    private static func load32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian }
    }

    private static func load64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian }
    }

    struct Malformed: Error, CustomStringConvertible { var description: String }

    private static func decodeBody(_ bytes: UnsafeRawBufferPointer, commitSequence: UInt64, limits: Store.Limits) throws -> StoreState {
        var reader = ByteReader(bytes)
        let blobCount = try reader.read(UInt64.self)
        guard blobCount <= UInt64(reader.remaining / blobEntrySize) else { throw Malformed(description: "blob count \(blobCount) exceeds the file") }
        var restored: [(Digest, BlobEntry)] = []
        restored.reserveCapacity(Int(blobCount))
        for _ in 0 ..< blobCount {
            let digest = try reader.readDigest()
            let entry = BlobEntry(
                packed: try reader.read(), rawLength: try reader.read(), storedLength: try reader.read(),
                refCount: try reader.read(), zeroSince: try reader.read())
            restored.append((digest, entry))
        }
        var state = StoreState()
        state.commitSequence = commitSequence
        let recordCount = try reader.read(UInt64.self)
        guard recordCount <= UInt64(reader.remaining / 12) else { throw Malformed(description: "record count \(recordCount) exceeds the file") }
        for _ in 0 ..< recordCount {
            guard let key = String(validating: try reader.readLengthPrefixed(limit: limits.maximumKeyLength), as: UTF8.self) else {
                throw Malformed(description: "a key is not UTF-8")
            }
            let value = Data(try reader.readLengthPrefixed(limit: limits.maximumValueLength))
            let referenceCount = Int(try reader.read(UInt32.self))
            guard referenceCount <= reader.remaining / Digest.byteCount else { throw Malformed(description: "reference count exceeds the file") }
            var references: [Digest] = []
            references.reserveCapacity(referenceCount)
            for _ in 0 ..< referenceCount { references.append(try reader.readDigest()) }
            state.records.updateValue(Record(value: value, references: references), forKey: key)
        }
        let referencedBytes = try reader.read(UInt64.self)
        let manifestCount = try reader.read(UInt64.self)
        guard manifestCount <= UInt64(reader.remaining / 40) else { throw Malformed(description: "chunked blob count \(manifestCount) exceeds the file") }
        var manifestSizes: [Digest: UInt64] = [:]
        manifestSizes.reserveCapacity(Int(manifestCount))
        for _ in 0 ..< manifestCount {
            let digest = try reader.readDigest()
            manifestSizes[digest] = try reader.read(UInt64.self)
        }
        state.blobs = BlobIndex(restoring: restored, manifestSizes: manifestSizes, referencedLogicalBytes: referencedBytes)
        guard state.blobs.count == restored.count, manifestSizes.count == Int(manifestCount) else { throw Malformed(description: "duplicate blob entries") }
        if let root = manifestSizes.keys.first(where: { state.blobs[$0]?.isManifest != true }) {
            throw Malformed(description: "chunked blob \(root) has no manifest node")
        }
        guard reader.isAtEnd else { throw Malformed(description: "\(reader.remaining) trailing bytes") }
        return state
    }
}
