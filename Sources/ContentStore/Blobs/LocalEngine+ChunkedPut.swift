import Dispatch
import Foundation
import Synchronization

/// The chunked-put pipeline: content above ``Store/Configuration/chunkingThreshold`` is cut by
/// ``Chunker`` into chunks, each stored as an ordinary blob, under a tree of ``ManifestNode``s whose
/// root is indexed under the SHA-256 of the whole content (Docs/chunking.md). How chunks are
/// compressed is its policy's (LocalEngine+CompressionPolicy.swift).
///
/// Owns: every chunk and node is in the index (freshened or placed) before the node that lists it,
/// and a pin held for the whole put keeps collection from them until the root is placed; memory
/// stays bounded whatever the content's size.
extension LocalEngine {
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
        let writer = ChunkWriter(engine: self)
        defer { writer.drain() }
        var hasher = SHA256.Hasher()
        // The bytes a batch left uncut (less than a maximum-size chunk), which begin the next one.
        // Its capacity is kept, so it stops allocating once it has held the longest tail.
        var carry: [UInt8] = []
        var total: UInt64 = 0
        var atEnd = false
        let capacity = configuration.chunking.maximumSize + Self.chunkingBatchSize
        while !atEnd {
            try CancellationToken.checkCancellation()  // between batches: what was stored is unreferenced garbage
            let batch = writer.takeBuffer(capacity: capacity)
            let raw = batch.storage
            carry.withUnsafeBytes { raw.copyMemory(from: $0) }
            var count = carry.count
            while count < carry.count + Self.chunkingBatchSize {
                let read = try read(UnsafeMutableRawBufferPointer(rebasing: raw[count ..< carry.count + Self.chunkingBatchSize]))
                if read == 0 {
                    atEnd = true
                    break
                }
                count += read
            }
            batch.count = count
            var chunks: [Range<Int>] = []
            var offset = 0
            let bytes = batch.bytes
            if knownDigest == nil { hasher.update(UnsafeRawBufferPointer(rebasing: bytes[carry.count...])) }
            while let length = chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: bytes[offset...]), isFinal: atEnd) {
                chunks.append(offset ..< offset + length)
                offset += length
            }
            total += UInt64(count - carry.count)
            carry.removeAll(keepingCapacity: true)
            carry.append(contentsOf: bytes[offset...])
            if chunks.isEmpty {
                writer.giveBack(batch)
            } else {
                try writer.submit(batch, chunks)
            }
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
    func storeChunks(_ batch: UnsafeRawBufferPointer, _ chunks: [CutChunk], time: UInt32, compressed done: () -> Void) throws {
        let absent = try absentIndices(chunks.map(\.digest), time: time)
        var placements: [LogRecord.BlobPlacement] = []
        defer { for placement in placements { packs.settle(placement.location.pack) } }
        let pieces = absent.map { UnsafeRawBufferPointer(rebasing: batch[chunks[$0].range]) }
        let (compressed, dictionary) = compressChunks(pieces, time: time)
        done()
        let entries = zip(absent, zip(pieces, compressed)).map { index, piece in
            NewEntry(digest: chunks[index].digest, bytes: piece.0, compressed: piece.1.map { .owned($0.frame) },
                     dictionary: piece.1?.usesDictionary == true ? dictionary : nil)
        }
        placements = try appendEntries(entries, time: time)
        try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            let fresh = placements.filter { Self.isAbsent($0.digest, from: &core, time: time) }
            guard !fresh.isEmpty else { return }
            _ = try wal.append(.blobs(fresh))
            core.state.apply(fresh)
        }
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
    private static func isAbsent(_ digest: Digest, from core: inout Core.Held, time: UInt32) -> Bool {
        !core.state.freshen(digest, time: time)
    }

    /// The digests of a batch's chunks, hashed on two threads.
    static func hashChunks(_ batch: UnsafeRawBufferPointer, _ ranges: [Range<Int>]) -> [CutChunk] {
        let digests = [Digest](unsafeUninitializedCapacity: ranges.count) { buffer, count in
            // Each side initializes only its own slots, and the buffers outlive the wait below.
            nonisolated(unsafe) let (slots, bytes) = (buffer, batch)
            onTwoThreads(count: ranges.count) { index in
                slots.initializeElement(at: index, to: SHA256.hash(UnsafeRawBufferPointer(rebasing: bytes[ranges[index]])))
            }
            count = ranges.count
        }
        return zip(ranges, digests).map { CutChunk(range: $0, digest: $1) }
    }
}

/// A batch's bytes, allocated once per put and recycled: a 2 MiB array per batch made the
/// allocator hand out fresh memory for each and keep the freed ones as slack, ~8 MiB above the
/// batches themselves (`MALLOC_MMAP_THRESHOLD_` showed it). `@unchecked Sendable`: one thread holds
/// it at a time — the reading thread fills it, ``ChunkWriter/submit(_:_:)`` hands it to the writer's
/// queue, which gives it back through the writer's lock once it is stored.
private final class BatchBuffer: @unchecked Sendable {
    let storage: UnsafeMutableRawBufferPointer
    /// Bytes of ``storage`` the batch holds.
    var count = 0

    init(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 64)
    }

    deinit { storage.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[..<count]) }
}

/// The storing side of a chunked put: a serial queue that stores batches in order, builds the
/// manifest tree, and keeps the first error. The reading thread blocks while
/// ``LocalEngine/chunkingBatchesInFlight`` batches wait or are compressed, which bounds memory: four
/// batch buffers at most (one filling, two waiting or compressing, one being written), reused for
/// the whole put.
private final class ChunkWriter: Sendable {
    private struct State {
        var builder = ManifestBuilder()
        var error: (any Error)?
        var batches = 0
        /// Buffers the queue is done with, for the reading thread's next batches.
        var spare: [BatchBuffer] = []
    }

    private let engine: LocalEngine
    private let queue = DispatchQueue(label: "ContentStore.chunked-put")
    private let slots = DispatchSemaphore(value: LocalEngine.chunkingBatchesInFlight)
    private let state = Mutex(State())

    init(engine: LocalEngine) {
        self.engine = engine
    }

    /// A buffer of `capacity` bytes for the next batch: one the queue is done with, or a new one.
    func takeBuffer(capacity: Int) -> BatchBuffer {
        state.withLock { $0.spare.popLast() } ?? BatchBuffer(capacity: capacity)
    }

    /// Takes back a buffer whose batch is stored (or had nothing to store).
    func giveBack(_ batch: BatchBuffer) {
        state.withLock { $0.spare.append(batch) }
    }

    /// Queues a batch of chunks (their ranges in `batch`), taking the buffer over; throws the error
    /// an earlier batch met.
    func submit(_ batch: BatchBuffer, _ ranges: [Range<Int>]) throws {
        try state.withLock { if let error = $0.error { throw error } }
        slots.wait()
        queue.async { [self] in
            defer { giveBack(batch) }
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
                let chunks = LocalEngine.hashChunks(batch.bytes, ranges)
                let time = engine.nowSeconds
                try engine.storeChunks(batch.bytes, chunks, time: time, compressed: releaseSlot)
                let nodes = state.withLock { state in
                    chunks.flatMap { state.builder.append(chunk: .init(digest: $0.digest, length: UInt64($0.range.count))) }
                }
                try engine.storeManifestNodes(nodes.map { ($0.digest, $0.encoded, nil, $0.node.entries.map(\.digest)) }, time: time)
                let batches = state.withLock { state in
                    state.batches += 1
                    return state.batches
                }
                if batches % LocalEngine.chunkingBatchesPerFlush == 0 {
                    try engine.commits.flushAppended()
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
        let time = engine.nowSeconds
        var placements = nodes.map { ($0.digest, $0.encoded, UInt64?.none, $0.node.entries.map(\.digest)) }
        placements.append((root, top.encoded(), size, top.entries.map(\.digest)))
        try engine.storeManifestNodes(placements, time: time)
    }
}
