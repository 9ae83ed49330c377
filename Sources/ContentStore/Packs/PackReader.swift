import Foundation

/// Walks the entries of a pack file from its headers: for rewriting a pack, verifying it, or
/// rebuilding the index from packs alone.
enum PackReader {
    /// What the index says about an entry.
    struct ExpectedEntry {
        var digest: Digest
        var rawLength: UInt32
        var storedLength: UInt32
        var compressed: Bool
    }

    /// No zstd frame expands more than this: a block yields at most 128 KiB and takes at least 4 bytes.
    static let maximumExpansion: UInt64 = 32768

    /// Refuses lengths no entry the store writes can have, before anything is allocated for them: a
    /// blob over ``Store/Limits/maximumBlobSize``, a stored form longer than the blob (the store
    /// keeps the compressed form only when it is smaller) or, uncompressed, of another length, or
    /// a compressed form that no zstd frame could expand to the blob's length.
    static func checkLengths(_ expected: ExpectedEntry, limits: Store.Limits, path: String, offset: UInt64) throws {
        let raw = UInt64(expected.rawLength), stored = UInt64(expected.storedLength)
        guard raw <= UInt64(max(0, limits.maximumBlobSize)) else {
            throw StoreError.corrupted("blob \(expected.digest) claims \(raw) bytes, over the limit of \(limits.maximumBlobSize)", path: path, offset: offset)
        }
        let plausible = expected.compressed ? stored < raw && raw <= stored * maximumExpansion : stored == raw
        guard plausible else {
            throw StoreError.corrupted("blob \(expected.digest) claims \(raw) bytes stored in \(stored)\(expected.compressed ? " compressed" : "")",
                                       path: path, offset: offset)
        }
    }

    /// Decodes an entry's bytes (its 56-byte header and payload) into the blob, checking them against
    /// what the index says. Lengths are checked (``checkLengths(_:limits:path:offset:)``) before the
    /// blob's buffer is allocated, and a zstd frame that declares another size is refused before
    /// it is decompressed. With `verify`, the blob is re-hashed; without, the entry's CRC is checked.
    ///
    /// An entry that uses a dictionary names it by its offset in the pack; `dictionary` returns
    /// the dictionary at that offset (it is only asked for one before `offset`, where the writer
    /// put it), or throws `corrupted` when it is damaged.
    static func decodeEntry(_ bytes: UnsafeRawBufferPointer, expected: ExpectedEntry, verify: Bool, limits: Store.Limits,
                            path: String, offset: UInt64, dictionary: (UInt64) throws -> ChunkDictionary = noDictionaries) throws -> Data {
        let digest = expected.digest
        try checkLengths(expected, limits: limits, path: path, offset: offset)
        guard bytes.count == PackFormat.entryHeaderSize + Int(expected.storedLength) else {
            throw StoreError.corrupted("pack entry for blob \(digest) is \(bytes.count) bytes, expected \(PackFormat.entryHeaderSize + Int(expected.storedLength))",
                                       path: path, offset: offset)
        }
        let header = UnsafeRawBufferPointer(rebasing: bytes[0 ..< PackFormat.entryHeaderSize])
        let payload = UnsafeRawBufferPointer(rebasing: bytes[PackFormat.entryHeaderSize...])
        let parsed = try checkHeader(header, expected: expected, path: path, offset: offset)
        // Without re-hashing, the entry checksum still catches damage to the stored bytes.
        if !verify && !PackFormat.checksumMatches(header: header, payload: payload) {
            throw StoreError.corrupted("pack entry for blob \(digest) fails its checksum", path: path, offset: offset)
        }
        var frame = payload
        var decompressor: Zstd.DecompressionDictionary?
        if parsed.usesDictionary {
            let reference = payload.loadUnaligned(as: UInt64.self).littleEndian
            guard reference >= UInt64(PackFormat.headerSize), reference < offset else {
                throw StoreError.corrupted("pack entry for blob \(digest) names a dictionary at offset \(reference), not before it", path: path, offset: offset)
            }
            frame = UnsafeRawBufferPointer(rebasing: payload[PackFormat.dictionaryReferenceSize...])
            decompressor = try dictionary(reference).decompressor
        }
        if expected.compressed, let declared = Zstd.declaredContentSize(frame), declared != UInt64(expected.rawLength) {
            throw StoreError.corrupted("blob \(digest)'s zstd frame declares \(declared) bytes, the index \(expected.rawLength)", path: path, offset: offset)
        }
        // Uninitialized (decompression or the copy fills every byte), and handed to the Data without a copy.
        let blob = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(expected.rawLength), alignment: 16)
        var returned = false
        defer { if !returned { blob.deallocate() } }
        var hashed: Digest?
        if expected.compressed {
            do {
                hashed = try decompress(frame, into: blob, dictionary: decompressor, hashing: verify)
            } catch {
                throw StoreError(code: .corrupted, message: "blob \(digest) does not decompress (\(error)) in \(path) at offset \(offset)",
                                 path: path, offset: offset, cause: error)
            }
        } else {
            blob.copyMemory(from: payload)
        }
        if verify && (hashed ?? SHA256.hash(UnsafeRawBufferPointer(blob))) != digest {
            throw StoreError.corrupted("blob \(digest) no longer hashes to its digest", path: path, offset: offset)
        }
        guard let base = blob.baseAddress, blob.count > 0 else { return Data() }
        returned = true
        return Data(bytesNoCopy: base, count: blob.count, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// The zstd frame of a decoded entry (its 56-byte header and payload) that decompresses on its
    /// own, or nil when the entry is stored raw or its frame needs a dictionary.
    static func standaloneFrame(ofEntry bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let header = UnsafeRawBufferPointer(rebasing: bytes[0 ..< PackFormat.entryHeaderSize])
        guard let parsed = try? PackFormat.parseEntryHeader(header), parsed.isCompressed, !parsed.usesDictionary else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[PackFormat.entryHeaderSize...])
    }

    /// Compressed blobs at least this long are hashed while they decompress, when their read
    /// verifies (``PipelinedHasher``): for a MiB of text, about 0.6 ms of SHA-256 overlaps the 1 ms
    /// of decoding instead of following it. Below it, handing stretches to another thread costs
    /// more than the overlap saves.
    static let pipelinedVerificationMinimumSize = 256 << 10

    /// Decompresses `frame` into `blob`; with `hashing`, returns the blob's SHA-256 when it was
    /// computed on the way (a large blob without a dictionary, the helper free), else nil.
    private static func decompress(_ frame: UnsafeRawBufferPointer, into blob: UnsafeMutableRawBufferPointer,
                                   dictionary: Zstd.DecompressionDictionary?, hashing: Bool) throws -> Digest? {
        guard hashing, dictionary == nil, blob.count >= pipelinedVerificationMinimumSize, let hasher = PipelinedHasher.claim() else {
            try Zstd.decompress(frame, into: blob, dictionary: dictionary)
            return nil
        }
        do {
            // About eight steps: zstd decodes the blocks each completes (128 KiB of output at most each).
            try Zstd.decompress(frame, into: blob, inputStep: max(4096, frame.count / 8)) { hasher.update($0) }
        } catch {
            hasher.cancel()
            throw error
        }
        return hasher.finish()
    }

    /// Uncompressed entries at least this long are read in place (``readRawEntry(from:at:expected:verify:limits:)``):
    /// two `pread`s instead of one, which pays once the copy it saves costs more than a system call
    /// (a 64 KiB copy takes a few microseconds, as long as a `pread`).
    static let inPlaceReadMinimumSize: UInt32 = 64 << 10

    /// Reads an uncompressed entry straight into the blob's own buffer: its header, then its
    /// payload, which is the blob (no intermediate buffer, no copy: for a blob of a MiB the copy
    /// and the faults of a second buffer cost as much as the read). Checked as
    /// ``decodeEntry(_:expected:verify:limits:path:offset:dictionary:)`` checks: lengths before the
    /// allocation, the header against the index, then the blob's re-hash with `verify`, else the
    /// entry's CRC32C.
    static func readRawEntry(from file: File, at offset: UInt64, expected: ExpectedEntry, verify: Bool, limits: Store.Limits) throws -> Data {
        // The caller picks this path from the index entry; an entry claiming compression has no
        // blob to read in place, whatever led here.
        guard !expected.compressed else {
            throw StoreError.corrupted("blob \(expected.digest) is stored compressed; its entry cannot be read in place", path: file.path, offset: offset)
        }
        try checkLengths(expected, limits: limits, path: file.path, offset: offset)
        let header = try file.readExactly(PackFormat.entryHeaderSize, at: offset)
        _ = try header.withUnsafeBytes { try checkHeader($0, expected: expected, path: file.path, offset: offset) }
        // Uninitialized: the read fills every byte, and the Data takes the buffer without a copy.
        let blob = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(expected.rawLength), alignment: 16)
        var returned = false
        defer { if !returned { blob.deallocate() } }
        try file.readExactly(into: blob, at: offset + UInt64(PackFormat.entryHeaderSize))
        let read = UnsafeRawBufferPointer(blob)
        if verify && SHA256.hash(read) != expected.digest {
            throw StoreError.corrupted("blob \(expected.digest) no longer hashes to its digest", path: file.path, offset: offset)
        }
        if !verify && !header.withUnsafeBytes({ PackFormat.checksumMatches(header: $0, payload: read) }) {
            throw StoreError.corrupted("pack entry for blob \(expected.digest) fails its checksum", path: file.path, offset: offset)
        }
        guard let base = blob.baseAddress, blob.count > 0 else { return Data() }
        returned = true
        return Data(bytesNoCopy: base, count: blob.count, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// The parsed header of the entry at `offset`, after checking that it is the entry the index
    /// describes (digest, lengths, compression).
    private static func checkHeader(_ header: UnsafeRawBufferPointer, expected: ExpectedEntry, path: String, offset: UInt64) throws -> PackFormat.EntryHeader {
        let digest = expected.digest
        let parsed: PackFormat.EntryHeader
        do throws(PackFormat.Malformed) {
            parsed = try PackFormat.parseEntryHeader(header)
        } catch {
            throw StoreError.corrupted("pack entry for blob \(digest) is damaged (\(error.reason))", path: path, offset: offset)
        }
        guard parsed.digest == digest, parsed.rawLength == expected.rawLength, parsed.storedLength == expected.storedLength,
              parsed.isCompressed == expected.compressed
        else {
            throw StoreError.corrupted("pack entry does not match the index for blob \(digest)", path: path, offset: offset)
        }
        return parsed
    }

    /// The resolver of ``decodeEntry(_:expected:verify:limits:path:offset:dictionary:)`` for entries
    /// that cannot use a dictionary (dictionaries themselves).
    static func noDictionaries(_ offset: UInt64) throws -> ChunkDictionary {
        throw StoreError(code: .corrupted, message: "a dictionary entry cannot use a dictionary (offset \(offset))")
    }

    /// (offset, header) of each entry, in file order. Stops at the sealed index, or at the first
    /// header that does not parse (a torn tail from a crash).
    static func entries(of file: File) throws -> [(offset: UInt64, header: PackFormat.EntryHeader)] {
        let size = try file.size()
        let end = try sealedIndexOffset(of: file, size: size) ?? size
        var entries: [(UInt64, PackFormat.EntryHeader)] = []
        var offset = UInt64(PackFormat.headerSize)
        while offset + UInt64(PackFormat.entryHeaderSize) <= end {
            let bytes = try file.readExactly(PackFormat.entryHeaderSize, at: offset)
            guard let header = try? bytes.withUnsafeBytes({ try PackFormat.parseEntryHeader($0) }),
                  offset + header.totalLength <= end
            else { break }
            entries.append((offset, header))
            offset += header.totalLength
        }
        return entries
    }

    /// Where the entries of a sealed pack end, from its footer; nil for an unsealed pack.
    static func sealedIndexOffset(of file: File, size: UInt64) throws -> UInt64? {
        guard size >= UInt64(PackFormat.headerSize + PackFormat.footerSize) else { return nil }
        let footer = try file.readExactly(PackFormat.footerSize, at: size - UInt64(PackFormat.footerSize))
        return footer.withUnsafeBytes { raw -> UInt64? in
            guard raw[0 ..< 8].elementsEqual(PackFormat.footerMagic),
                  CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0 ..< 28])) == raw.loadUnaligned(fromByteOffset: 28, as: UInt32.self).littleEndian
            else { return nil }
            let offset = raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
            return offset <= size ? offset : nil
        }
    }
}
