#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The blob reader: ``Store/get(_:)``, ``Store/export(_:to:)`` and the chunk trees of chunked blobs,
/// through the read cache.
///
/// Owns rule 4 on the read side: no bytes leave unverified (the entry's CRC32C always, the digest
/// with ``Store/Configuration/verifiesReads``), the cache holds only bytes that passed, and a blob
/// the index no longer holds is `notFound`, cached or not.
extension LocalEngine {
    /// The bytes of the blob with `digest`. Recently got blobs come from the read cache
    /// (``Configuration/readCacheSize``), which holds only bytes verified as they were read.
    ///
    /// - Throws: `notFound` if the store does not hold it; `limitExceeded` if it is larger than
    ///   ``Limits/maximumGetSize`` (``export(_:to:)`` streams it instead); `corrupted`, naming the
    ///   pack and offset (and for a chunked blob the damaged chunk), if the stored bytes fail their
    ///   checksum or (with ``Configuration/verifiesReads``) no longer hash to `digest`. Wrong bytes
    ///   are never returned.
    func get(_ digest: Digest) throws -> Data {
        try checkOpen()
        metrics.got()
        // Both the read cache's lookup and the index's (a hit's `contains`, a miss's `locate`) wait
        // on memory in a large store; started first, the index's overlaps the cache's.
        if cache.capacity > 0 { core.withLock { $0.state.blobs.prefetch(digest) } }
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
        guard entry.isManifest else { return try readBlob(digest, entry: entry, from: file, caching: true) }
        var data = Data(capacity: Int(size))
        try forEachChunk(ofChunkedBlob: digest, size: size) { data.append($0) }
        return data
    }

    /// The index entry of a stored blob and the pack file holding it.
    func locate(_ digest: Digest) throws -> (BlobEntry, File) {
        // A collection may move the blob between the lookup and the read; the second lookup sees where.
        for attempt in 0 ..< 2 {
            guard let entry = core.withLock({ $0.state.blobs[digest] }) else { break }
            guard let file = try packs.file(entry.location.pack) else {
                if attempt == 0 { continue }
                let path = packs.path(of: entry.location.pack)
                throw StoreError.corrupted("blob \(digest) is indexed in a pack that is missing", path: path, offset: entry.location.offset)
            }
            return (entry, file)
        }
        throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
    }

    /// The blob of a (non-manifest) entry, checked as ``get(_:)`` describes; with `caching`, also
    /// kept in the read cache once it has passed, as its zstd frame where that is smaller.
    func readBlob(_ digest: Digest, entry: BlobEntry, from file: File, verify: Bool? = nil, caching: Bool = false) throws -> Data {
        let offset = entry.location.offset
        let expected = Self.expected(digest, entry)
        // Checked before the read allocates: an index entry claiming a huge blob cannot exhaust memory.
        try PackReader.checkLengths(expected, limits: configuration.limits, path: file.path, offset: offset)
        // Damage is logged here, where every read of a pack entry passes, with the file and offset.
        return try logDamage(to: digest) {
            // Stored raw (the blob did not compress), a large entry's payload is read in place as the blob.
            if !entry.isCompressed && entry.rawLength >= PackReader.inPlaceReadMinimumSize {
                let blob = try PackReader.readRawEntry(from: file, at: offset, expected: expected, verify: verify ?? configuration.verifiesReads,
                                                       limits: configuration.limits)
                if caching { cache.insert(blob, for: digest) }
                return blob
            }
            return try withUnsafeTemporaryAllocation(byteCount: PackFormat.entryHeaderSize + Int(entry.storedLength), alignment: 16) { buffer in
                try file.readExactly(into: buffer, at: offset)
                let stored = UnsafeRawBufferPointer(buffer)
                let blob = try PackReader.decodeEntry(stored, expected: expected, verify: verify ?? configuration.verifiesReads,
                                                      limits: configuration.limits, path: file.path, offset: offset) { dictionaryOffset in
                    try dictionary(in: entry.location.pack, file: file, at: dictionaryOffset)
                }
                if caching && cache.capacity > 0 { cache.insert(blob, for: digest, frame: PackReader.standaloneFrame(ofEntry: stored)) }
                return blob
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

    /// The blob from the read cache, counted as a get, or nil when it is not there (the blocking get
    /// then counts it).
    func cachedBlob(_ digest: Digest) throws -> Data? {
        try checkOpen()
        // As in the blocking get: a hit counts only while the index holds the blob.
        guard let cached = cache.blob(digest), contains(digest) else { return nil }
        metrics.got()
        metrics.readCacheHit()
        return cached
    }

    /// Whether the store holds the blob.
    func contains(_ digest: Digest) -> Bool {
        core.withLock { $0.isOpen && $0.state.blobs[digest] != nil }
    }

    /// How many record references point at the blob (0 for unknown blobs).
    func refCount(of digest: Digest) -> Int {
        core.withLock { Int($0.state.blobs[digest]?.refCount ?? 0) }
    }

    /// Writes a blob to `file`: to a temporary file beside it, synced, then renamed into place. A
    /// chunked blob is written chunk by chunk, so memory stays bounded whatever its size.
    func export(_ digest: Digest, to file: URL) throws {
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

    /// Size and reference count of a blob, or nil when the store does not hold it. No I/O.
    func info(for digest: Digest) -> BlobInfo? {
        core.withLock { core in
            core.state.blobs[digest].map {
                BlobInfo(digest: digest, size: Int(core.state.blobs.size(of: digest, $0)), storedSize: Int($0.entryLength), refCount: Int($0.refCount))
            }
        }
    }

    // MARK: Chunked blobs

    /// The size of a chunked blob, from the index.
    func chunkedSize(of digest: Digest) throws -> UInt64 {
        guard let size = core.withLock({ $0.state.blobs.manifestSizes[digest] }) else {
            throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
        }
        return size
    }

    /// Calls `body` with each chunk of a chunked blob, in order, each verified (by its digest with
    /// ``Configuration/verifiesReads``, else by its entry's checksum); with `verifiesReads`, the
    /// whole content is also re-hashed against `digest` before this returns.
    ///
    /// - Throws: `corrupted` naming the damaged chunk or node (and its pack and offset), or the blob
    ///   when its chunks are intact but do not hash to its digest.
    func forEachChunk(ofChunkedBlob digest: Digest, size: UInt64, verify: Bool? = nil, _ body: (Data) throws -> Void) throws {
        let verifying = verify ?? configuration.verifiesReads
        let root = try readManifestNode(digest, isRoot: true, of: digest)
        guard root.totalLength == size else {
            throw StoreError(code: .corrupted, message: "blob \(digest): its manifest lists \(root.totalLength) bytes, the index \(size)")
        }
        var hasher = SHA256.Hasher()
        try walk(root, of: digest, verify: verifying, hasher: &hasher, body)
        let computed = hasher.finalize()
        if verifying && computed != digest {
            throw StoreError(code: .corrupted, message: "blob \(digest): its chunks are intact but no longer hash to its digest (its manifest is damaged)")
        }
    }

    private func walk(_ node: ManifestNode, of root: Digest, verify: Bool, hasher: inout SHA256.Hasher, _ body: (Data) throws -> Void) throws {
        for entry in node.entries {
            try checkOpen()
            try CancellationToken.checkCancellation()
            if node.level == 0 {
                let chunk = try readChunk(entry, of: root, verify: verify)
                if verify { chunk.withUnsafeBytes { hasher.update($0) } }
                try body(chunk)
            } else {
                let child = try readManifestNode(entry.digest, isRoot: false, of: root)
                guard child.level == node.level - 1, child.totalLength == entry.length else {
                    throw StoreError(code: .corrupted, message: "blob \(root): manifest node \(entry.digest) is level \(child.level) with \(child.totalLength) bytes; its parent expects level \(node.level - 1) with \(entry.length)")
                }
                try walk(child, of: root, verify: verify, hasher: &hasher, body)
            }
        }
    }

    private func readChunk(_ chunk: ManifestNode.Entry, of root: Digest, verify: Bool) throws -> Data {
        do {
            let (entry, file) = try locate(chunk.digest)
            guard !entry.isManifest, UInt64(entry.rawLength) == chunk.length else {
                throw StoreError.corrupted("the index holds blob \(chunk.digest) with \(entry.rawLength) bytes, not a chunk of \(chunk.length)",
                                           path: file.path, offset: entry.location.offset)
            }
            return try readBlob(chunk.digest, entry: entry, from: file, verify: verify)
        } catch let error as StoreError {
            throw Self.chunkError(error, chunk: chunk.digest, of: root)
        }
    }

    /// Reads and checks a manifest node of the blob `root`: its entry's checksum always, and for a
    /// node other than the root its digest (the root is checked by the whole content's hash).
    func readManifestNode(_ digest: Digest, isRoot: Bool, of root: Digest) throws -> ManifestNode {
        do {
            let (entry, file) = try locate(digest)
            guard entry.isManifest else {
                throw StoreError.corrupted("blob \(digest) is not a manifest node", path: file.path, offset: entry.location.offset)
            }
            let bytes = try readBlob(digest, entry: entry, from: file, verify: false)
            return try bytes.withUnsafeBytes { raw in
                guard isRoot || ManifestNode.digest(of: raw) == digest else {
                    throw StoreError.corrupted("manifest node \(digest) no longer hashes to its digest", path: file.path, offset: entry.location.offset)
                }
                do {
                    return try ManifestNode.decode(raw)
                } catch {
                    throw StoreError.corrupted("manifest node \(digest) does not parse (\(error))", path: file.path, offset: entry.location.offset)
                }
            }
        } catch let error as StoreError {
            throw Self.chunkError(error, chunk: digest, of: root)
        }
    }

    /// A read error of one piece of a chunked blob, as a failure to read the blob: `corrupted` (a
    /// missing piece too: the blob's root promises it), naming the piece, its pack and offset.
    private static func chunkError(_ error: StoreError, chunk: Digest, of root: Digest) -> StoreError {
        guard error.code != .closed else { return error }
        let place = error.path.map { " in \($0)" + (error.offset.map { " at offset \($0)" } ?? "") } ?? ""
        return StoreError(code: .corrupted, message: "blob \(root) cannot be read: chunk \(chunk)\(place): \(error.message)",
                          path: error.path, offset: error.offset, cause: error)
    }
}
