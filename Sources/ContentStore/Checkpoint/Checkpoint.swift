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
///                    u64 index seed (version 2; absent in version 1)
///                    u64 blob count, then per blob: digest[32] | u64 packed location | u32 raw length
///                      | u32 stored length | u32 reference count | u32 zero-since
///                    u64 record count, then per record (ascending keys): u32 key length | key
///                      | u32 value length | value | u32 reference count | digests
///                    u64 referenced bytes (Σ over record references of the blob's size)
///                    u64 chunked blob count, then per chunked blob: digest[32] | u64 size
/// ```
/// Written to a temporary file, synced, renamed into place and the directory synced: a checkpoint
/// is either wholly present or absent.
///
/// The blobs are listed in the index's slot order, which is the order of their keyed hashes, and
/// version 2 saves the key (the index seed): a load that restores the index under the same seed
/// receives the digests in the order they take in its table, so each lands at the end of the run
/// it joins (no shifting, sequential memory) instead of at a random slot. Version 1 files load too,
/// under a fresh seed.
enum Checkpoint {
    static let version: UInt32 = 2
    /// The version before the index seed: still loaded.
    static let versionWithoutSeed: UInt32 = 1
    static let headerSize = 40
    static let frameSize = 1 << 20
    static let magic: [UInt8] = Array("CSCHKPNT".utf8)
    static let blobEntrySize = 56
    /// The most a load reserves for the body up front (more grows as frames check out).
    static let maximumBodyReservation: UInt64 = 1 << 30

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
        body.append(state.blobs.entries.seed)
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
        guard version == Checkpoint.version || version == Checkpoint.versionWithoutSeed else {
            throw StoreError(code: .unsupportedFormat, message: "checkpoint version \(version) is not supported", path: path)
        }
        let firstSegment = load64(header, at: 16)
        let commitSequence = load64(header, at: 24)

        // Reserved from the file's size, bounded: untouched capacity costs no memory, so a sparse
        // file claiming any size still only gets what its frames fill.
        let body = try LargeBuffer(reservingCapacity: Int(min(size - UInt64(headerSize), maximumBodyReservation)), path: path)
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
            // Read straight into the body: appended only once its checksum holds.
            try body.append(length, path: path) { payload in
                try file.readExactly(into: payload, at: offset + 8)
                guard CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(payload))) == crc else {
                    throw StoreError.corrupted("checkpoint frame fails its checksum", path: path, offset: offset)
                }
            }
            offset += 8 + UInt64(length)
        }
        do {
            let state = try body.withUnsafeBytes {
                try decodeBody($0, hasSeed: version != Checkpoint.versionWithoutSeed, commitSequence: commitSequence, limits: limits)
            }
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

    /// Decodes the body. The blob section has a fixed size per entry, so the records' offset is
    /// known at once: the blob index is built on ``loadHelper`` while this thread decodes the
    /// records (the two halves of a load, about equal in cost).
    private static func decodeBody(_ bytes: UnsafeRawBufferPointer, hasSeed: Bool, commitSequence: UInt64, limits: Store.Limits) throws -> StoreState {
        var reader = ByteReader(bytes)
        let seed = hasSeed ? try reader.read(UInt64.self) : UInt64.random(in: .min ... .max)
        let blobCount = try reader.read(UInt64.self)
        guard blobCount <= UInt64(reader.remaining / blobEntrySize) else { throw Malformed(description: "blob count \(blobCount) exceeds the file") }
        let blobSection = try reader.readBytes(Int(blobCount) * blobEntrySize)
        // The buffer outlives the wait below, and only the helper touches `restored` until then.
        nonisolated(unsafe) let blobBytes = blobSection
        nonisolated(unsafe) var restored: Result<BlobIndex, Malformed>?
        let helped = DispatchGroup()
        loadHelper.async(group: helped) { restored = Result { () throws(Malformed) in try decodeBlobs(blobBytes, seed: seed) } }
        let records: Result<SortedMap<String, Record>, any Error> = Result { try decodeRecords(&reader, limits: limits) }
        helped.wait()
        var state = StoreState()
        state.commitSequence = commitSequence
        state.records = try records.get()
        state.blobs = try restored!.get()

        let referencedBytes = try reader.read(UInt64.self)
        let manifestCount = try reader.read(UInt64.self)
        guard manifestCount <= UInt64(reader.remaining / 40) else { throw Malformed(description: "chunked blob count \(manifestCount) exceeds the file") }
        var manifestSizes: [Digest: UInt64] = [:]
        manifestSizes.reserveCapacity(Int(manifestCount))
        for _ in 0 ..< manifestCount {
            let digest = try reader.readDigest()
            manifestSizes[digest] = try reader.read(UInt64.self)
        }
        guard manifestSizes.count == Int(manifestCount) else { throw Malformed(description: "duplicate chunked blob entries") }
        if let root = manifestSizes.keys.first(where: { state.blobs[$0]?.isManifest != true }) {
            throw Malformed(description: "chunked blob \(root) has no manifest node")
        }
        state.blobs.finishRestoring(manifestSizes: manifestSizes, referencedLogicalBytes: referencedBytes)
        guard reader.isAtEnd else { throw Malformed(description: "\(reader.remaining) trailing bytes") }
        return state
    }

    /// The bytes as a String if they are valid UTF-8. `String(validating:as:)` takes a generic path
    /// that looks up type metadata on every call (a quarter of a million-record load); decoding
    /// replaces every invalid sequence, so the bytes were valid exactly when the result's UTF-8 is
    /// the bytes themselves.
    static func validString(_ bytes: UnsafeRawBufferPointer) -> String? {
        var string = String(decoding: bytes, as: UTF8.self)
        let unchanged = string.withUTF8 { decoded in
            decoded.count == bytes.count && (bytes.isEmpty || memcmp(decoded.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
        return unchanged ? string : nil
    }

    /// The second thread of a checkpoint load.
    private static let loadHelper = DispatchQueue(label: "ContentStore.checkpoint-load")

    private static func decodeBlobs(_ section: UnsafeRawBufferPointer, seed: UInt64) throws(Malformed) -> BlobIndex {
        let count = section.count / blobEntrySize
        var index = BlobIndex(restoringCapacity: count, seed: seed)
        for offset in stride(from: 0, to: section.count, by: blobEntrySize) {
            let digest = Digest(bytes: UnsafeRawBufferPointer(rebasing: section[offset ..< offset + Digest.byteCount]))
            func field<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
                T(littleEndian: section.loadUnaligned(fromByteOffset: offset + at, as: T.self))
            }
            index.restore(digest, BlobEntry(
                packed: field(32, UInt64.self), rawLength: field(40, UInt32.self), storedLength: field(44, UInt32.self),
                refCount: field(48, UInt32.self), zeroSince: field(52, UInt32.self)))
        }
        guard index.count == count else { throw Malformed(description: "duplicate blob entries") }
        return index
    }

    /// The record section, into a map built in one pass (``SortedMap/init(count:ascending:)``):
    /// the keys must be strictly ascending, as written.
    private static func decodeRecords(_ reader: inout ByteReader, limits: Store.Limits) throws -> SortedMap<String, Record> {
        let recordCount = try reader.read(UInt64.self)
        guard recordCount <= UInt64(reader.remaining / 12) else { throw Malformed(description: "record count \(recordCount) exceeds the file") }
        var previous: String?
        return try SortedMap(count: Int(recordCount)) {
            guard let key = validString(try reader.readLengthPrefixed(limit: limits.maximumKeyLength)) else {
                throw Malformed(description: "a key is not UTF-8")
            }
            if let previous, !(previous < key) {
                throw Malformed(description: "record keys are not in ascending order at \"\(Store.describe(key))\"")
            }
            previous = key
            let value = Data(try reader.readLengthPrefixed(limit: limits.maximumValueLength))
            let referenceCount = Int(try reader.read(UInt32.self))
            guard referenceCount <= reader.remaining / Digest.byteCount else { throw Malformed(description: "reference count exceeds the file") }
            if referenceCount == 1 { return (key, Record(value: value, onlyReference: try reader.readDigest())) }
            var references: [Digest] = []
            references.reserveCapacity(referenceCount)
            for _ in 0 ..< referenceCount { references.append(try reader.readDigest()) }
            return (key, Record(value: value, references: references))
        }
    }
}
