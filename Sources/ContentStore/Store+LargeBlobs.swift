import Dispatch
import Foundation
import Synchronization

/// Chunked blobs: content above ``Store/Configuration/chunkingThreshold`` is cut by ``Chunker``
/// into chunks, each stored as an ordinary blob, under a tree of ``ManifestNode``s whose root is
/// indexed under the SHA-256 of the whole content (Docs/chunking.md).
extension Store {
    /// Bytes a chunked put reads per batch: large enough that the handoff between the reading and
    /// the storing thread costs nothing, small enough that the batches in flight stay a few MiB.
    static let chunkingBatchSize = 2 << 20
    /// Batches handed to the storing thread and not yet compressed: the reading thread fills the
    /// next batch while these wait or are compressed and one more is written, so memory holds four
    /// batches (and the compressed forms of one). Two rather than one: the reader need not wait for
    /// a batch's compression to end.
    static let chunkingBatchesInFlight = 2
    /// A chunked put flushes the WAL after this many batches (64 MiB), so the records it buffers
    /// stay bounded too (and, with ``Durability/full``, what it stored so far is durable).
    static let chunkingBatchesPerFlush = 32

    /// A chunk cut from a batch: where it lies in the batch and its digest.
    struct CutChunk: Sendable {
        var range: Range<Int>
        var digest: Digest
    }

    /// Stores in-memory bytes above the threshold as a chunked blob.
    func putChunked(_ data: Data) throws -> Digest {
        try checkOpen()
        let digest = Digest.sha256(data)
        if try freshenIfPresent(digest, time: nowSeconds) { return digest }
        var offset = 0
        return try putChunked(knownDigest: digest) { buffer in
            let count = min(buffer.count, data.count - offset)
            data.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset ..< offset + count])) }
            offset += count
            return count
        }
    }

    /// Stores what `read` yields (it fills the buffer it is given as far as it can and returns the
    /// count, 0 at the end) as a chunked blob. This thread reads, hashes the whole content and cuts
    /// chunks; the writer's queue hashes, compresses (both on two threads) and stores them and
    /// builds the manifest tree.
    ///
    /// Every chunk and node is freshened or written before the node that lists it, and a pin held
    /// for the whole put keeps collection away from them (their times are all at or after it) until
    /// the root is placed.
    func putChunked(knownDigest: Digest?, read: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> Digest {
        guard configuration.chunking.maximumSize <= configuration.limits.maximumBlobSize else {
            throw StoreError.limitExceeded("chunks of up to \(configuration.chunking.maximumSize) bytes exceed the blob limit of \(configuration.limits.maximumBlobSize)")
        }
        let pin = snapshots.pin(at: nowSeconds)
        defer { withExtendedLifetime(pin) {} }
        let chunker = Chunker(configuration.chunking)
        let writer = ChunkWriter(store: self)
        defer { writer.drain() }
        var hasher = SHA256.Hasher()
        var carry: [UInt8] = []
        var total: UInt64 = 0
        var atEnd = false
        while !atEnd {
            try CancellationToken.checkCancellation()  // between batches: what was stored is unreferenced garbage
            let batch = try [UInt8](unsafeUninitializedCapacity: carry.count + Self.chunkingBatchSize) { buffer, count in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                carry.withUnsafeBytes { raw.copyMemory(from: $0) }
                count = carry.count
                while count < raw.count {
                    let read = try read(UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
                    if read == 0 {
                        atEnd = true
                        break
                    }
                    count += read
                }
            }
            var chunks: [Range<Int>] = []
            var offset = 0
            batch.withUnsafeBytes { raw in
                if knownDigest == nil { hasher.update(UnsafeRawBufferPointer(rebasing: raw[carry.count...])) }
                while let length = chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[offset...]), isFinal: atEnd) {
                    chunks.append(offset ..< offset + length)
                    offset += length
                }
            }
            total += UInt64(batch.count - carry.count)
            carry = Array(batch[offset...])
            if !chunks.isEmpty { try writer.submit(batch, chunks) }
        }
        let computed = hasher.finalize()
        let digest = knownDigest ?? computed
        // A file that shrank while it was read: an empty blob is no manifest.
        guard total > 0 else { return try put(bytes: UnsafeRawBufferPointer(start: nil, count: 0)) }
        try writer.finish(root: digest, size: total)
        return digest
    }

    /// Stores the manifest nodes of a put: those the index lacks are written and placed with their
    /// children (one WAL record for all), the others freshened.
    func storeManifestNodes(_ nodes: [(digest: Digest, encoded: [UInt8], logicalSize: UInt64?, children: [Digest])], time: UInt32) throws {
        let absent = try absentIndices(nodes.map(\.digest), time: time)
        var placements: [LogRecord.ManifestPlacement] = []
        defer { for manifest in placements { packs.settle(manifest.placement.location.pack) } }
        for index in absent {
            let node = nodes[index]
            let placement = try node.encoded.withUnsafeBytes { try appendEntry(node.digest, bytes: $0, manifest: true, time: time) }
            placements.append(LogRecord.ManifestPlacement(placement: placement, logicalSize: node.logicalSize, children: node.children))
        }
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            let fresh = placements.filter { Self.isAbsent($0.placement.digest, from: &core, time: time) }
            guard !fresh.isEmpty else { return }
            var placed = Set(fresh.map(\.placement.digest))
            for manifest in fresh {
                // The put's pin keeps every child; a missing one is a bug, refused before the log has it.
                if let missing = manifest.children.first(where: { core.state.blobs[$0] == nil && !placed.contains($0) }) {
                    throw StoreError(code: .corrupted, message: "manifest node \(manifest.placement.digest) lists blob \(missing), which left the store during the put")
                }
                placed.insert(manifest.placement.digest)
            }
            _ = try wal.append(.manifests(fresh))
            do {
                try core.state.apply(fresh)
            } catch {
                throw StoreError(code: .corrupted, message: "manifest nodes could not be applied: \(error)")
            }
        }
    }

    /// Stores the chunks of one batch: those the index lacks are compressed, written and placed
    /// (one WAL record for the batch), the others freshened. `compressed` is called once the
    /// compressing threads are done with the batch.
    func storeChunks(_ batch: [UInt8], _ chunks: [CutChunk], time: UInt32, compressed done: () -> Void) throws {
        let absent = try absentIndices(chunks.map(\.digest), time: time)
        var placements: [LogRecord.BlobPlacement] = []
        defer { for placement in placements { packs.settle(placement.location.pack) } }
        try batch.withUnsafeBytes { raw in
            let pieces = absent.map { UnsafeRawBufferPointer(rebasing: raw[chunks[$0].range]) }
            let (compressed, dictionary) = compressChunks(pieces, time: time)
            done()
            let entries = zip(absent, zip(pieces, compressed)).map { index, piece in
                NewEntry(digest: chunks[index].digest, bytes: piece.0, compressed: piece.1.map { .owned($0.frame) },
                         dictionary: piece.1?.usesDictionary == true ? dictionary : nil)
            }
            placements = try appendEntries(entries, time: time)
        }
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            let fresh = placements.filter { Self.isAbsent($0.digest, from: &core, time: time) }
            guard !fresh.isEmpty else { return }
            _ = try wal.append(.blobs(fresh))
            core.state.apply(fresh)
        }
    }

    /// Average chunks a dictionary is trained on: 1 MiB with the default 8 KiB chunks, enough for
    /// zstd's trainer to find what they share and cheap enough (tens of milliseconds) to do once per
    /// pack (Docs/chunking.md#dictionaries). A batch with fewer than half as many new bytes (a small
    /// edit) trains none.
    static let dictionaryTrainingChunks = 128
    /// Training bytes per byte of dictionary: 64 KiB with the defaults, the best of 32, 64 and 128 KiB
    /// measured on text (a larger dictionary costs more than it saves).
    static let dictionaryTrainingRatio = 16
    /// Chunks whose frames without a dictionary come to more than this fraction of their size get
    /// none: a dictionary does little for them, and compressing with one costs more where zstd
    /// gives up quickly on incompressible input.
    static let dictionaryCompressibility = 0.9
    /// The fraction of the stored bytes a dictionary must save to be used: compressing with one
    /// costs 10–15% more CPU, which a dictionary that does not fit the content (unrelated text,
    /// where it even costs bytes) does not pay for.
    static let dictionaryMinimumGain = 0.03
    /// Every this-many-th new chunk of a batch is compressed first, without a dictionary and, when
    /// the pack has one, with it. When none of them compresses (random or already compressed data),
    /// the others are stored raw without trying: zstd would spend about 1 ms per MB to find nothing
    /// (a compressible stretch of fewer chunks than this amid such data can thus go uncompressed).
    /// Otherwise the batch uses the dictionary only when the sample shows it pays. About 3% of a
    /// batch is compressed twice.
    static let sampleInterval = 32
    /// Batches of fewer new chunks (an edit's few) are compressed whole: too small a sample says
    /// little about the others.
    static let samplingMinimumChunks = 64

    /// The frames of a batch's new chunks, and the dictionary those that use one were compressed with.
    ///
    /// A sample of the chunks is compressed first. When none of it compresses, the rest is stored
    /// raw. Otherwise the rest is compressed with the active pack's dictionary when it has one and
    /// the sample shows it pays, else without; when the pack has no decision yet, no other put is
    /// training one, and the batch compressed (and has enough new bytes to learn from), a dictionary
    /// is trained on it and the batch compressed again with it, each chunk keeping the smaller
    /// frame. Training decides for the pack, even when it yields nothing or the dictionary does not
    /// pay: incompressible data is not trained on again until the next pack.
    private func compressChunks(_ pieces: [UnsafeRawBufferPointer], time: UInt32) -> ([CompressedChunk?], ChunkDictionary?) {
        let active = packs.activePackID
        let trains: Bool
        let dictionary: ChunkDictionary?
        switch dictionaries.choice(forActivePack: active) {
        case .decided(let decided): (trains, dictionary) = (false, decided)
        case .train: (trains, dictionary) = (true, nil)
        case .without: (trains, dictionary) = (false, nil)
        }
        defer { if trains { dictionaries.endTraining() } }
        let compressor = dictionary?.compressor
        let sample = Array(stride(from: 0, to: pieces.count, by: Self.sampleInterval))
        let sampled = compress(sample.map { (pieces[$0], nil) } + (compressor == nil ? [] : sample.map { (pieces[$0], compressor) }))
        var frames = [CompressedChunk?](repeating: nil, count: pieces.count)
        for (index, frame) in zip(sample, sampled) { frames[index] = frame }
        guard pieces.count < Self.samplingMinimumChunks || frames.contains(where: { $0 != nil }) else {
            // With no frame, training finds the batch incompressible and decides the pack gets no dictionary.
            if trains { _ = trainDictionary(on: pieces, compressed: frames, forActivePack: active, time: time) }
            return (frames, nil)
        }
        var pays = false
        if compressor != nil {
            let plain = Array(sampled[..<sample.count])
            let chosen = Self.smaller(plain, Array(sampled[sample.count...]))
            pays = Self.pays(sample.map { pieces[$0] }, plain: plain, chosen: chosen)
            if pays {
                for (index, frame) in zip(sample, chosen) { frames[index] = frame }
            }
        }
        let rest = pieces.indices.filter { $0 % Self.sampleInterval != 0 }
        for (index, frame) in zip(rest, compress(rest.map { (pieces[$0], pays ? compressor : nil) })) { frames[index] = frame }
        if pays { return (frames, dictionary) }
        guard trains,
              let trained = trainDictionary(on: pieces, compressed: frames, forActivePack: active, time: time),
              let trainedCompressor = trained.compressor
        else { return (frames, nil) }
        let smaller = Self.smaller(frames, compress(pieces.map { ($0, trainedCompressor) }))
        let trainedPays = Self.pays(pieces, plain: frames, chosen: smaller)
        dictionaries.decide(trainedPays ? trained : nil, forActivePack: active)
        return trainedPays ? (smaller, trained) : (frames, nil)
    }

    /// For each chunk, the smaller of its frame without and with the dictionary (counting the
    /// dictionary reference); nil where neither is smaller than the chunk.
    private static func smaller(_ plain: [CompressedChunk?], _ withDictionary: [CompressedChunk?]) -> [CompressedChunk?] {
        zip(plain, withDictionary).map { plain, withDictionary -> CompressedChunk? in
            guard let withDictionary else { return plain }
            guard let plain else { return withDictionary }
            return withDictionary.frame.count + PackFormat.dictionaryReferenceSize < plain.frame.count ? withDictionary : plain
        }
    }

    /// Whether `chosen` (frames some of which use the dictionary) store `pieces` in at least
    /// ``dictionaryMinimumGain`` fewer bytes than `plain` (frames without), counting only the
    /// pieces that compress one way or the other: incompressible ones (random stretches of mixed
    /// content) cost the same either way and would only dilute the gain on the others.
    private static func pays(_ pieces: [UnsafeRawBufferPointer], plain: [CompressedChunk?], chosen: [CompressedChunk?]) -> Bool {
        func stored(_ piece: UnsafeRawBufferPointer, _ frame: CompressedChunk?) -> Int {
            frame.map { $0.frame.count + ($0.usesDictionary ? PackFormat.dictionaryReferenceSize : 0) } ?? piece.count
        }
        var without = 0
        var with = 0
        for index in pieces.indices where plain[index] != nil || chosen[index] != nil {
            without += stored(pieces[index], plain[index])
            with += stored(pieces[index], chosen[index])
        }
        return without > 0 && Double(with) <= (1 - dictionaryMinimumGain) * Double(without)
    }

    /// Trains a dictionary for the active pack on the first of `pieces` (`compressed` are their
    /// frames without one); nil when they are too few (no decision), or do not compress or training
    /// fails (both decided: no dictionary for the pack).
    private func trainDictionary(on pieces: [UnsafeRawBufferPointer], compressed: [CompressedChunk?], forActivePack active: UInt32?,
                                 time: UInt32) -> ChunkDictionary? {
        let trainingBytes = Self.dictionaryTrainingChunks * configuration.chunking.averageSize
        var taken = 0
        var samples: [UnsafeRawBufferPointer] = []
        for piece in pieces where taken < trainingBytes {
            samples.append(piece)
            taken += piece.count
        }
        // Too few new bytes to learn from (a small edit): it is not worth a dictionary in a new pack.
        guard taken >= trainingBytes / 2 else { return nil }
        let stored = zip(pieces, compressed).reduce(0) { $0 + ($1.1?.frame.count ?? $1.0.count) }
        let total = pieces.reduce(0) { $0 + $1.count }
        guard Double(stored) <= Self.dictionaryCompressibility * Double(total) else {
            dictionaries.decide(nil, forActivePack: active)
            return nil
        }
        configuration.beforeTrainingDictionary?()
        let level = configuration.compressionLevel
        let capacity = min(trainingBytes / Self.dictionaryTrainingRatio, PackFormat.maximumDictionarySize)
        let trained = Zstd.trainDictionary(samples: samples, capacity: capacity, level: level)
            .flatMap { ChunkDictionary(trained: $0, level: level, time: time) }
        if trained == nil { dictionaries.decide(nil, forActivePack: active) }
        return trained
    }

    /// The indices of the digests the index lacks (each digest's first occurrence only); the others
    /// are freshened, so collection keeps them for the put that reuses them.
    private func absentIndices(_ digests: [Digest], time: UInt32) throws -> [Int] {
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            var seen = Set<Digest>()
            return digests.indices.filter { Self.isAbsent(digests[$0], from: &core, time: time) && seen.insert(digests[$0]).inserted }
        }
    }

    /// Whether the index lacks `digest`; freshens it when it has it (for a blob just written, a
    /// concurrent put of the same bytes won, and this copy is dead space).
    private static func isAbsent(_ digest: Digest, from core: inout Core, time: UInt32) -> Bool {
        guard core.state.blobs[digest] != nil else { return true }
        core.state.blobs.freshen(digest, time: time)
        return false
    }

    /// How a chunk is stored when compression helps: its zstd frame, made with the dictionary or without.
    struct CompressedChunk {
        var frame: [UInt8]
        var usesDictionary: Bool
    }

    /// The zstd frames of `jobs`' pieces (nil where compression does not help), each with its
    /// dictionary when it has one: a piece is kept compressed only when its frame, with the
    /// dictionary reference in front, is smaller than the piece, so incompressible chunks stay raw
    /// at the cost of one compression attempt, as without a dictionary. The calling thread and
    /// ``compressionHelper`` take pieces in turn as they finish: a queue of its own rather than
    /// `concurrentPerform`, whose workers come from the pool every other blocking client of
    /// Dispatch in the process shares (two cores give it two).
    private func compress(_ jobs: [(piece: UnsafeRawBufferPointer, dictionary: Zstd.CompressionDictionary?)]) -> [CompressedChunk?] {
        // A batch all sampled (or all present) leaves nothing: no hand-off to the helper for it.
        guard !jobs.isEmpty else { return [] }
        let level = configuration.compressionLevel
        let results = UnsafeMutableBufferPointer<CompressedChunk?>.allocate(capacity: jobs.count)
        results.initialize(repeating: nil)
        defer {
            results.deinitialize()
            results.deallocate()
        }
        // Each side writes only its own slots, and the buffers outlive the wait below.
        nonisolated(unsafe) let slots = results
        nonisolated(unsafe) let inputs = jobs
        Self.onTwoThreads(count: inputs.count) { index in
            let (piece, dictionary) = inputs[index]
            if let dictionary {
                slots[index] = Zstd.compress(piece, dictionary: dictionary, limit: piece.count - PackFormat.dictionaryReferenceSize)
                    .map { CompressedChunk(frame: $0, usesDictionary: true) }
            } else {
                slots[index] = Zstd.compress(piece, level: level).map { CompressedChunk(frame: $0, usesDictionary: false) }
            }
        }
        return Array(results)
    }

    /// The digests of a batch's chunks, hashed on two threads.
    static func hashChunks(_ batch: [UInt8], _ ranges: [Range<Int>]) -> [CutChunk] {
        let digests = [Digest](unsafeUninitializedCapacity: ranges.count) { buffer, count in
            batch.withUnsafeBytes { raw in
                // Each side initializes only its own slots, and the buffers outlive the wait below.
                nonisolated(unsafe) let (slots, bytes) = (buffer, raw)
                onTwoThreads(count: ranges.count) { index in
                    slots.initializeElement(at: index, to: SHA256.hash(UnsafeRawBufferPointer(rebasing: bytes[ranges[index]])))
                }
            }
            count = ranges.count
        }
        return zip(ranges, digests).map { CutChunk(range: $0, digest: $1) }
    }

    /// Runs `body` for every index below `count`, on the calling thread and the helper. Each thread
    /// takes the next index until none is left, so a thread the reader (or anything else) keeps off a
    /// core leaves its share to the other instead of holding up the batch.
    private static func onTwoThreads(count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let next = Atomic<Int>(0)
        let work = { @Sendable in
            while case let index = next.wrappingAdd(1, ordering: .relaxed).oldValue, index < count { body(index) }
        }
        let helped = DispatchGroup()
        compressionHelper.async(group: helped, execute: work)
        work()
        helped.wait()
    }

    /// The second thread of chunked puts, for hashing and compressing chunks (shared by concurrent puts).
    private static let compressionHelper = DispatchQueue(label: "ContentStore.chunk-compression")

    // MARK: Reading

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

/// The storing side of a chunked put: a serial queue that stores batches in order, builds the
/// manifest tree, and keeps the first error. The reading thread blocks while
/// ``Store/chunkingBatchesInFlight`` batches wait or are compressed, which bounds memory.
private final class ChunkWriter: Sendable {
    private struct State {
        var builder = ManifestBuilder()
        var error: (any Error)?
        var batches = 0
    }

    private let store: Store
    private let queue = DispatchQueue(label: "ContentStore.chunked-put")
    private let slots = DispatchSemaphore(value: Store.chunkingBatchesInFlight)
    private let state = Mutex(State())

    init(store: Store) {
        self.store = store
    }

    /// Queues a batch of chunks (their ranges in `batch`); throws the error an earlier batch met.
    func submit(_ batch: [UInt8], _ ranges: [Range<Int>]) throws {
        try state.withLock { if let error = $0.error { throw error } }
        slots.wait()
        queue.async { [self] in
            // The slot is given back once the batch is compressed, so the reading thread reads and
            // hashes the next one while this one is written and logged, where the second
            // compressing thread has nothing to do.
            var holdsSlot = true
            let releaseSlot = {
                if holdsSlot { self.slots.signal() }
                holdsSlot = false
            }
            defer { releaseSlot() }
            guard state.withLock({ $0.error == nil }) else { return }
            do {
                // Hashed here rather than by the reading thread, which also hashes the whole content
                // and cuts the chunks: both threads share the hashing, as they share the compression.
                let chunks = Store.hashChunks(batch, ranges)
                let time = store.nowSeconds
                try store.storeChunks(batch, chunks, time: time, compressed: releaseSlot)
                let nodes = state.withLock { state in
                    chunks.flatMap { state.builder.append(chunk: .init(digest: $0.digest, length: UInt64($0.range.count))) }
                }
                try store.storeManifestNodes(nodes.map { ($0.digest, $0.encoded, nil, $0.node.entries.map(\.digest)) }, time: time)
                let batches = state.withLock { state in
                    state.batches += 1
                    return state.batches
                }
                if batches % Store.chunkingBatchesPerFlush == 0 {
                    try store.flushLog(upTo: store.wal.appendedLSN, synchronously: store.configuration.durability == .full)
                }
            } catch {
                state.withLock { $0.error = $0.error ?? error }
            }
        }
    }

    /// Waits for the queued batches.
    func drain() {
        queue.sync {}
    }

    /// Waits for the queued batches, then stores the open nodes and the root under `root`.
    func finish(root: Digest, size: UInt64) throws {
        drain()
        let (nodes, top) = try state.withLock { state in
            if let error = state.error { throw error }
            return state.builder.finish()
        }
        let time = store.nowSeconds
        var placements = nodes.map { ($0.digest, $0.encoded, UInt64?.none, $0.node.entries.map(\.digest)) }
        placements.append((root, top.encoded(), size, top.entries.map(\.digest)))
        try store.storeManifestNodes(placements, time: time)
    }
}
