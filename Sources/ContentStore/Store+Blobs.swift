#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension Store {
    /// Stores `data` as a blob and returns its digest. Storing bytes the store already holds writes
    /// nothing and restarts the blob's grace period if it is unreferenced.
    ///
    /// A blob is durable once a commit that follows the put returns (or the store is closed). Until a
    /// record references it, collection removes it after the grace period.
    @discardableResult
    public func put(_ data: Data) throws -> Digest {
        let digest = data.count > configuration.chunkingThreshold ? try putChunked(data) : try data.withUnsafeBytes { try put(bytes: $0) }
        notePut(bytes: UInt64(data.count))
        return digest
    }

    /// Stores `bytes`. With `framed` (`bytes` preceded by `PackFormat.entryHeaderSize` bytes the
    /// put may overwrite), bytes stored uncompressed are written with their header in one `pwrite`.
    func put(bytes: UnsafeRawBufferPointer, framed: UnsafeMutableRawBufferPointer? = nil) throws -> Digest {
        try checkOpen()
        guard bytes.count <= configuration.limits.maximumBlobSize else {
            throw StoreError.limitExceeded("a blob of \(bytes.count) bytes exceeds the limit of \(configuration.limits.maximumBlobSize)")
        }
        let digest = SHA256.hash(bytes)
        let time = nowSeconds
        if try freshenIfPresent(digest, time: time) { return digest }

        let placement = try appendEntry(digest, bytes: bytes, framed: framed, time: time)
        // Until the placement is in the index, collection must not judge the pack by the index.
        defer { packs.settle(placement.location.pack) }

        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            if core.state.blobs[digest] != nil {
                // A concurrent put of the same bytes won; this copy is dead space for collection to reclaim.
                core.state.blobs.freshen(digest, time: time)
                return
            }
            _ = try wal.append(.blobs([placement]))
            core.state.apply([placement])
        }
        return digest
    }

    func freshenIfPresent(_ digest: Digest, time: UInt32) throws -> Bool {
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            guard core.state.blobs[digest] != nil else { return false }
            core.state.blobs.freshen(digest, time: time)
            return true
        }
    }

    /// Compresses `bytes` (keeping them raw when that is no smaller) and appends them to a pack.
    /// The frame goes to a pooled buffer, after room for its header (``PackEntry/Payload/framed(_:)``);
    /// `framed`, when given, is `bytes` with such room, for writing them raw. The caller places the
    /// result in the index, then settles the pack.
    func appendEntry(_ digest: Digest, bytes: UnsafeRawBufferPointer, framed: UnsafeMutableRawBufferPointer? = nil, manifest: Bool = false,
                     time: UInt32) throws -> LogRecord.BlobPlacement {
        // One byte less than the input for the frame: a frame that is not smaller is not worth storing.
        try ScratchBuffer.with(count: PackFormat.entryHeaderSize + max(0, bytes.count - 1)) { output in
            let room = PackFormat.entryHeaderSize
            let frame = Zstd.compress(bytes, into: UnsafeMutableRawBufferPointer(rebasing: output[room...]), level: configuration.compressionLevel)
                .map { PackEntry.Payload.framed(UnsafeMutableRawBufferPointer(rebasing: output[..<(room + $0)])) }
            let entry = NewEntry(digest: digest, bytes: bytes, compressed: frame, framed: framed, manifest: manifest)
            return try appendEntries([entry], time: time)[0]
        }
    }

    /// A blob to append: its bytes (and the same bytes with room for a header in front, when the
    /// caller has them so), and their zstd frame when compressing helped (made with `dictionary`
    /// when there is one).
    struct NewEntry {
        var digest: Digest
        var bytes: UnsafeRawBufferPointer
        var compressed: PackEntry.Payload?
        var framed: UnsafeMutableRawBufferPointer?
        var manifest = false
        var dictionary: ChunkDictionary?
    }

    /// Appends blobs to the packs, in as few writes as the packs allow. The caller places the
    /// results in the index, then settles their packs.
    func appendEntries(_ entries: [NewEntry], time: UInt32) throws -> [LogRecord.BlobPlacement] {
        let packEntries = entries.map { entry in
            if let dictionary = entry.dictionary, let frame = entry.compressed {
                return PackEntry(digest: entry.digest, rawLength: UInt32(entry.bytes.count), frame: frame, dictionary: dictionary, time: time)
            }
            let payload = entry.compressed ?? entry.framed.map(PackEntry.Payload.framed) ?? .borrowed(entry.bytes)
            let header = payload.withUnsafeBytes {
                PackFormat.entryHeader(digest: entry.digest, compressed: entry.compressed != nil, manifest: entry.manifest,
                                       rawLength: UInt32(entry.bytes.count), payload: $0, time: time)
            }
            return PackEntry(header: header, payload: payload, indexEntry: PackFormat.IndexEntry(
                digest: entry.digest, offset: 0, rawLength: UInt32(entry.bytes.count), storedLength: UInt32(payload.count)))
        }
        let locations = try packs.append(packEntries)
        return entries.indices.map { index in
            let (entry, stored) = (entries[index], packEntries[index].indexEntry)
            return LogRecord.BlobPlacement(
                digest: entry.digest, location: locations[index], compressed: entry.compressed != nil,
                rawLength: stored.rawLength, storedLength: stored.storedLength, time: time, manifest: entry.manifest)
        }
    }

    /// The bytes of the blob with `digest`. Recently got blobs come from the read cache
    /// (``Configuration/readCacheSize``), which holds only bytes verified as they were read.
    ///
    /// - Throws: `notFound` if the store does not hold it; `limitExceeded` if it is larger than
    ///   ``Limits/maximumGetSize`` (``export(_:to:)`` streams it instead); `corrupted`, naming the
    ///   pack and offset (and for a chunked blob the damaged chunk), if the stored bytes fail their
    ///   checksum or (with ``Configuration/verifiesReads``) no longer hash to `digest`. Wrong bytes
    ///   are never returned.
    public func get(_ digest: Digest) throws -> Data {
        try checkOpen()
        metrics.got()
        // A hit counts only while the index holds the blob: a collected blob is notFound, cached or not.
        if let cached = cache.blob(digest), contains(digest) { metrics.readCacheHit(); return cached }
        let (entry, file) = try locate(digest)
        // An entry claiming more than its stored bytes can hold is damage, whatever the size limit.
        if !entry.isManifest {
            try PackReader.checkLengths(Self.expected(digest, entry), limits: configuration.limits, path: file.path, offset: entry.location.offset)
        }
        let size = entry.isManifest ? try chunkedSize(of: digest) : UInt64(entry.rawLength)
        guard size <= UInt64(max(0, configuration.limits.maximumGetSize)) else {
            throw StoreError.limitExceeded("blob \(digest) is \(size) bytes; get returns at most \(configuration.limits.maximumGetSize) (export streams it)")
        }
        guard entry.isManifest else {
            let blob = try readBlob(digest, entry: entry, from: file)
            cache.insert(blob, for: digest)
            return blob
        }
        var data = Data(capacity: Int(size))
        try forEachChunk(ofChunkedBlob: digest, size: size) { data.append($0) }
        return data
    }

    /// The index entry of a stored blob and the pack file holding it.
    func locate(_ digest: Digest) throws -> (BlobEntry, File) {
        // A collection may move the blob between the lookup and the read; the second lookup sees where.
        for attempt in 0 ..< 2 {
            guard let entry = core.withLock({ $0.state.blobs[digest] }) else { break }
            guard let file = packs.file(entry.location.pack) else {
                if attempt == 0 { continue }
                let path = packs.path(of: entry.location.pack)
                throw StoreError.corrupted("blob \(digest) is indexed in a pack that is missing", path: path, offset: entry.location.offset)
            }
            return (entry, file)
        }
        throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
    }

    func readBlob(_ digest: Digest, entry: BlobEntry, from file: File, verify: Bool? = nil) throws -> Data {
        let offset = entry.location.offset
        let expected = Self.expected(digest, entry)
        // Checked before the read allocates: an index entry claiming a huge blob cannot exhaust memory.
        try PackReader.checkLengths(expected, limits: configuration.limits, path: file.path, offset: offset)
        // Damage is logged here, where every read of a pack entry passes, with the file and offset.
        return try logDamage(to: digest) {
            try withUnsafeTemporaryAllocation(byteCount: PackFormat.entryHeaderSize + Int(entry.storedLength), alignment: 16) { stored in
                try file.readExactly(into: stored, at: offset)
                return try PackReader.decodeEntry(UnsafeRawBufferPointer(stored), expected: expected, verify: verify ?? configuration.verifiesReads,
                                                  limits: configuration.limits, path: file.path, offset: offset) { dictionaryOffset in
                    try dictionary(in: entry.location.pack, file: file, at: dictionaryOffset)
                }
            }
        }
    }

    /// The dictionary at `offset` of a pack, from the cache or read and verified.
    func dictionary(in pack: UInt32, file: File, at offset: UInt64) throws -> ChunkDictionary {
        try dictionaries.dictionary(at: BlobLocation(pack: pack, offset: offset)) {
            try ChunkDictionary.read(from: file, at: offset, limits: configuration.limits)
        }
    }

    static func expected(_ digest: Digest, _ entry: BlobEntry) -> PackReader.ExpectedEntry {
        PackReader.ExpectedEntry(digest: digest, rawLength: entry.rawLength, storedLength: entry.storedLength, compressed: entry.isCompressed)
    }

    /// Whether the store holds the blob.
    public func contains(_ digest: Digest) -> Bool {
        core.withLock { $0.isOpen && $0.state.blobs[digest] != nil }
    }

    /// How many record references point at the blob (0 for unknown blobs).
    public func refCount(of digest: Digest) -> Int {
        core.withLock { Int($0.state.blobs[digest]?.refCount ?? 0) }
    }

    /// Stores the contents of a file as a blob, reading it in pieces: memory stays bounded whatever
    /// the file's size (a file above ``Configuration/chunkingThreshold`` is chunked as it is read;
    /// its digest is still the SHA-256 of the whole content).
    @discardableResult
    public func put(contentsOf file: URL) throws -> Digest {
        try checkOpen()
        // pread rather than mmap: each munmap in a multi-threaded process shoots down the other cores' TLBs.
        let input = try fileSystem.open(file.path, flags: O_RDONLY, followingSymlinks: true)
        let size = try input.size()
        guard size > UInt64(configuration.chunkingThreshold) else {
            // Read after room for the entry header: stored raw, the blob is written straight from here.
            let digest = try ScratchBuffer.with(count: PackFormat.entryHeaderSize + Int(size)) { framed in
                let bytes = UnsafeMutableRawBufferPointer(rebasing: framed[PackFormat.entryHeaderSize...])
                try input.readExactly(into: bytes, at: 0)
                return try put(bytes: UnsafeRawBufferPointer(bytes), framed: framed)
            }
            notePut(bytes: size)
            return digest
        }
        var offset: UInt64 = 0
        let digest = try putChunked(knownDigest: nil) { buffer in
            let count = try input.read(into: buffer, at: offset)
            offset += UInt64(count)
            return count
        }
        notePut(bytes: offset)
        return digest
    }

    /// Writes a blob to `file`: to a temporary file beside it, synced, then renamed into place. A
    /// chunked blob is written chunk by chunk, so memory stays bounded whatever its size.
    public func export(_ digest: Digest, to file: URL) throws {
        try checkOpen()
        let (entry, stored) = try locate(digest)
        let directory = file.deletingLastPathComponent().path
        let temporary = directory + "/." + file.lastPathComponent + ".\(getpid()).tmp"
        let output = try fileSystem.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
        do {
            if entry.isManifest {
                var offset: UInt64 = 0
                try forEachChunk(ofChunkedBlob: digest, size: try chunkedSize(of: digest)) { chunk in
                    try chunk.withUnsafeBytes { try output.write($0, at: offset) }
                    offset += UInt64(chunk.count)
                }
            } else {
                let data = try readBlob(digest, entry: entry, from: stored)
                try data.withUnsafeBytes { try output.write($0, at: 0) }
            }
            try output.synchronize()
            try fileSystem.rename(temporary, to: file.path)
            try fileSystem.synchronizeDirectory(directory)
        } catch {
            try? fileSystem.remove(temporary)
            throw error
        }
    }
}

/// Facts about one stored blob.
public struct BlobInfo: Hashable, Sendable, Codable {
    /// The blob's digest.
    public var digest: Digest
    /// Uncompressed size in bytes.
    public var size: Int
    /// Bytes its pack entry occupies (compressed payload and header); for a chunked blob, its
    /// manifest root's (the chunks are shared between versions and counted in ``Statistics``).
    public var storedSize: Int
    /// Record references pointing at it.
    public var refCount: Int
}

extension Store {
    /// Size and reference count of a blob, or nil when the store does not hold it. No I/O.
    public func info(for digest: Digest) -> BlobInfo? {
        core.withLock { core in
            core.state.blobs[digest].map {
                BlobInfo(digest: digest, size: Int(core.state.blobs.size(of: digest, $0)), storedSize: Int($0.entryLength), refCount: Int($0.refCount))
            }
        }
    }
}
