#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The blob writer: whole blobs (``Store/put(_:)`` at or below the chunking threshold, and
/// ``Store/put(contentsOf:)``), hashed and compressed outside every lock, appended to a pack, then
/// placed in the index with one WAL record.
///
/// Owns: a blob is in the index only once its entry is in a pack (rule 2's order: the commit pipeline
/// makes those bytes durable before any commit that references it); a put of a blob the index holds
/// writes nothing and freshens it, under the core lock, so a collection deciding at the same moment
/// keeps it (rule 3); the pack an entry went to stays unjudged by collection until the index knows
/// the entry (``PackStore/settle(_:)``).
extension LocalEngine {
    /// Stores `data` as a blob and returns its digest. Storing bytes the store already holds writes
    /// nothing and restarts the blob's grace period if it is unreferenced.
    ///
    /// A blob is durable once a commit that follows the put returns (or the store is closed). Until a
    /// record references it, collection removes it after the grace period.
    @discardableResult
    func put(_ data: Data) throws -> Digest {
        let digest = data.count > configuration.chunkingThreshold ? try putChunked(data) : try data.withUnsafeBytes { try put(bytes: $0) }
        notePut(bytes: UInt64(data.count))
        return digest
    }

    /// ``put(_:)`` of bytes whose digest the caller computed (``Store/put(_:knownDigest:)``).
    func put(_ data: Data, knownDigest digest: Digest) throws -> Digest {
        guard data.count <= configuration.chunkingThreshold else { return try put(data) }
        let stored = try data.withUnsafeBytes { try put(bytes: $0, knownDigest: digest) }
        notePut(bytes: UInt64(data.count))
        return stored
    }

    /// Stores `bytes` (whose SHA-256 is `knownDigest` when the caller has it). With `framed` (`bytes` preceded by `PackFormat.entryHeaderSize` bytes the
    /// put may overwrite), bytes stored uncompressed are written with their header in one `pwrite`.
    func put(bytes: UnsafeRawBufferPointer, framed: UnsafeMutableRawBufferPointer? = nil, knownDigest: Digest? = nil) throws -> Digest {
        try checkOpen()
        guard bytes.count <= configuration.limits.maximumBlobSize else {
            throw StoreError.limitExceeded("a blob of \(bytes.count) bytes exceeds the limit of \(configuration.limits.maximumBlobSize)")
        }
        let (digest, compresses) = hashAndProbe(bytes, knownDigest: knownDigest)
        let time = nowSeconds
        if try freshenIfPresent(digest, time: time) { return digest }

        let placement = try appendEntry(digest, bytes: bytes, framed: framed, compresses: compresses, time: time)
        // Until the placement is in the index, collection must not judge the pack by the index.
        defer { packs.settle(placement.location.pack) }

        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            // A concurrent put of the same bytes won; this copy is dead space for collection to reclaim.
            if core.state.freshen(digest, time: time) { return }
            _ = try wal.append(.blobs([placement]))
            core.state.apply([placement])
        }
        return digest
    }

    /// The digest of `bytes` (`knownDigest` when given) and, for a blob the compression probe
    /// samples, its verdict (``worthCompressing(_:)``; nil for smaller blobs, which need none). A large
    /// blob is hashed on the helper (``PipelinedHasher``, when no other put or read holds it) while
    /// the calling thread probes it: the two cost about as much (0.6 ms and 0.4 ms for 1 MiB), and
    /// the probe's work is lost only when the blob turns out to be stored already, where compression
    /// would have waited for the digest.
    func hashAndProbe(_ bytes: UnsafeRawBufferPointer, knownDigest: Digest?) -> (Digest, compresses: Bool?) {
        guard bytes.count >= Self.compressionProbeMinimumSize else { return (knownDigest ?? SHA256.hash(bytes), nil) }
        if let knownDigest { return (knownDigest, worthCompressing(bytes)) }
        guard let hasher = PipelinedHasher.claim() else { return (SHA256.hash(bytes), worthCompressing(bytes)) }
        hasher.update(bytes)
        let compresses = worthCompressing(bytes)
        return (hasher.finish(), compresses)
    }

    func freshenIfPresent(_ digest: Digest, time: UInt32) throws -> Bool {
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            return core.state.freshen(digest, time: time)
        }
    }

    /// Compresses `bytes` (keeping them raw when that is no smaller, or when a probe of a large
    /// blob finds it barely compresses: ``worthCompressing(_:)``, whose verdict `compresses` is when
    /// the caller has it) and appends them to a pack.
    /// The frame goes to a pooled buffer, after room for its header (``PackEntry/Payload/framed(_:)``);
    /// `framed`, when given, is `bytes` with such room, for writing them raw. The caller places the
    /// result in the index, then settles the pack.
    /// A small whole blob is compressed with the small-blob dictionary once there is one, and
    /// sampled for it until then (LocalEngine+SmallBlobDictionary).
    func appendEntry(_ digest: Digest, bytes: UnsafeRawBufferPointer, framed: UnsafeMutableRawBufferPointer? = nil, manifest: Bool = false,
                     compresses: Bool? = nil, time: UInt32) throws -> LogRecord.BlobPlacement {
        let small = Self.usesSmallBlobDictionary(count: bytes.count, manifest: manifest)
        if small, let dictionary = smallBlobs.current, let compressor = dictionary.compressor {
            // The frame on the stack: a small blob's is at most 16 KiB.
            let placement = try withUnsafeTemporaryAllocation(byteCount: bytes.count, alignment: 1) { output -> LogRecord.BlobPlacement? in
                guard let length = Self.smallBlobFrame(bytes, dictionary: compressor, into: output) else { return nil }
                let frame = UnsafeRawBufferPointer(rebasing: output[..<length])
                let entry = NewEntry(digest: digest, bytes: bytes, compressed: .borrowed(frame), framed: nil, manifest: false, dictionary: dictionary)
                return try appendEntries([entry], time: time)[0]
            }
            if let placement { return placement }
        }
        let placement = try appendEntryWithoutDictionary(digest, bytes: bytes, framed: framed, manifest: manifest, compresses: compresses, time: time)
        if small && placement.compressed && smallBlobs.isSampling { sampleSmallBlob(bytes, time: time) }
        return placement
    }

    private func appendEntryWithoutDictionary(_ digest: Digest, bytes: UnsafeRawBufferPointer, framed: UnsafeMutableRawBufferPointer?,
                                              manifest: Bool, compresses: Bool?, time: UInt32) throws -> LogRecord.BlobPlacement {
        // One byte less than the input for the frame: a frame that is not smaller is not worth storing.
        try ScratchBuffer.with(count: PackFormat.entryHeaderSize + max(0, bytes.count - 1)) { output in
            let room = PackFormat.entryHeaderSize
            let length = compresses ?? worthCompressing(bytes)
                ? Zstd.compress(bytes, into: UnsafeMutableRawBufferPointer(rebasing: output[room...]), level: configuration.compressionLevel,
                                minimumMatch: Self.minimumMatch(forBlobOf: bytes.count))
                : nil
            let frame = length.map { PackEntry.Payload.framed(UnsafeMutableRawBufferPointer(rebasing: output[..<(room + $0)])) }
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

    /// Stores the contents of a file as a blob, reading it in pieces: memory stays bounded whatever
    /// the file's size (a file above ``Configuration/chunkingThreshold`` is chunked as it is read;
    /// its digest is still the SHA-256 of the whole content).
    @discardableResult
    func put(contentsOf file: URL) throws -> Digest {
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
}
