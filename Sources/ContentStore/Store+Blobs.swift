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
        try data.withUnsafeBytes { try put(bytes: $0) }
    }

    func put(bytes: UnsafeRawBufferPointer) throws -> Digest {
        try checkOpen()
        guard bytes.count <= configuration.limits.maximumBlobSize else {
            throw StoreError.limitExceeded("a blob of \(bytes.count) bytes exceeds the limit of \(configuration.limits.maximumBlobSize)")
        }
        let digest = SHA256.hash(bytes)
        let time = nowSeconds
        if try freshenIfPresent(digest, time: time) { return digest }

        let compressed = Zstd.compress(bytes, level: configuration.compressionLevel)
        let placement = try compressed.map { payload in
            try payload.withUnsafeBytes { try append(digest, compressed: true, rawLength: bytes.count, payload: $0, time: time) }
        } ?? append(digest, compressed: false, rawLength: bytes.count, payload: bytes, time: time)
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

    private func freshenIfPresent(_ digest: Digest, time: UInt32) throws -> Bool {
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            guard core.state.blobs[digest] != nil else { return false }
            core.state.blobs.freshen(digest, time: time)
            return true
        }
    }

    private func append(_ digest: Digest, compressed: Bool, rawLength: Int, payload: UnsafeRawBufferPointer, time: UInt32) throws -> LogRecord.BlobPlacement {
        let header = PackFormat.entryHeader(digest: digest, compressed: compressed, rawLength: UInt32(rawLength), payload: payload, time: time)
        let location = try packs.append(header: header, payload: payload, indexEntry: PackFormat.IndexEntry(
            digest: digest, offset: 0, rawLength: UInt32(rawLength), storedLength: UInt32(payload.count)))
        return LogRecord.BlobPlacement(
            digest: digest, location: location, compressed: compressed,
            rawLength: UInt32(rawLength), storedLength: UInt32(payload.count), time: time)
    }

    /// The bytes of the blob with `digest`. Recently got blobs come from the read cache
    /// (``Configuration/readCacheSize``), re-hashed like blobs read from their pack.
    ///
    /// - Throws: `notFound` if the store does not hold it; `corrupted`, naming the pack and offset, if
    ///   the stored bytes fail their checksum or (with ``Configuration/verifiesReads``) no longer hash
    ///   to `digest`. Wrong bytes are never returned.
    public func get(_ digest: Digest) throws -> Data {
        try checkOpen()
        // A collection may move the blob between the lookup and the read; the second lookup sees where.
        for attempt in 0 ..< 2 {
            guard let entry = core.withLock({ $0.state.blobs[digest] }) else {
                throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
            }
            if let cached = cache.blob(digest) {
                // Re-hashed like bytes read from a pack: bytes damaged in memory are not returned either.
                if !configuration.verifiesReads || Digest.sha256(cached) == digest { return cached }
                cache.remove(digest)
            }
            guard let file = packs.file(entry.location.pack) else {
                if attempt == 0 { continue }
                let path = packs.path(of: entry.location.pack)
                throw StoreError.corrupted("blob \(digest) is indexed in a pack that is missing", path: path, offset: entry.location.offset)
            }
            let blob = try readBlob(digest, entry: entry, from: file)
            cache.insert(blob, for: digest)
            return blob
        }
        throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
    }

    func readBlob(_ digest: Digest, entry: BlobEntry, from file: File, verify: Bool? = nil) throws -> Data {
        let offset = entry.location.offset
        let expected = PackReader.ExpectedEntry(digest: digest, rawLength: entry.rawLength, storedLength: entry.storedLength, compressed: entry.isCompressed)
        // Checked before the read allocates: an index entry claiming a huge blob cannot exhaust memory.
        try PackReader.checkLengths(expected, limits: configuration.limits, path: file.path, offset: offset)
        return try withUnsafeTemporaryAllocation(byteCount: PackFormat.entryHeaderSize + Int(entry.storedLength), alignment: 16) { stored in
            try file.readExactly(into: stored, at: offset)
            return try PackReader.decodeEntry(UnsafeRawBufferPointer(stored), expected: expected, verify: verify ?? configuration.verifiesReads,
                                              limits: configuration.limits, path: file.path, offset: offset)
        }
    }

    /// Whether the store holds the blob.
    public func contains(_ digest: Digest) -> Bool {
        core.withLock { $0.isOpen && $0.state.blobs[digest] != nil }
    }

    /// How many record references point at the blob (0 for unknown blobs).
    public func refCount(of digest: Digest) -> Int {
        core.withLock { Int($0.state.blobs[digest]?.refCount ?? 0) }
    }

    /// Stores the contents of a file as a blob.
    @discardableResult
    public func put(contentsOf file: URL) throws -> Digest {
        try checkOpen()
        // pread rather than mmap: each munmap in a multi-threaded process shoots down the other cores' TLBs.
        let input = try fileSystem.open(file.path, flags: O_RDONLY, followingSymlinks: true)
        let size = try input.size()
        guard size <= UInt64(configuration.limits.maximumBlobSize) else {
            throw StoreError.limitExceeded("\(file.path) is \(size) bytes; the blob limit is \(configuration.limits.maximumBlobSize)")
        }
        let bytes = try input.readExactly(Int(size), at: 0)
        return try bytes.withUnsafeBytes { try put(bytes: $0) }
    }

    /// Writes a blob to `file`: to a temporary file beside it, synced, then renamed into place.
    public func export(_ digest: Digest, to file: URL) throws {
        let data = try get(digest)
        let directory = file.deletingLastPathComponent().path
        let temporary = directory + "/." + file.lastPathComponent + ".\(getpid()).tmp"
        let output = try fileSystem.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
        do {
            try data.withUnsafeBytes { try output.write($0, at: 0) }
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
    /// Bytes its pack entry occupies (compressed payload and header).
    public var storedSize: Int
    /// Record references pointing at it.
    public var refCount: Int
}

extension Store {
    /// Size and reference count of a blob, or nil when the store does not hold it. No I/O.
    public func info(for digest: Digest) -> BlobInfo? {
        core.withLock { core in
            core.state.blobs[digest].map {
                BlobInfo(digest: digest, size: Int($0.rawLength), storedSize: Int($0.entryLength), refCount: Int($0.refCount))
            }
        }
    }
}
