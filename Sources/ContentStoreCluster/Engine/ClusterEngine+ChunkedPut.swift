#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Chunked puts (Docs/cluster.md §3.1 step 5): content above
/// ``Store/Configuration/chunkingThreshold`` is cut by the embedded store's ``Chunker`` into the
/// same chunks, under the same ``ManifestNode`` tree, whose root is stored under the SHA-256 of the
/// whole content — so a chunked blob has the same digest, chunks and nodes on every backend.
///
/// Owns: memory stays bounded whatever the content's size (one read batch, one pending pack of
/// ``ClusterConfiguration/packSizeTarget`` bytes, the unfinished node of each level); every chunk
/// and node has its row before the node that lists it, and a `put` lease held for the whole put
/// keeps the collector from what it registered or freshened until the root is in.
extension ClusterEngine {
    /// Bytes a chunked put reads per batch: the chunks of a batch are freshened in one statement,
    /// so this sets the put's round trips (one per 4 MiB, about two per default pack) against
    /// its memory (one batch).
    static let chunkingBatchSize = 4 << 20
    /// Finished manifest nodes a put holds before it writes them even if its pack is not full.
    static let pendingNodeLimit = 256

    /// Refuses chunking and packing settings the cluster cannot run with.
    static func validateChunking(_ configuration: Store.Configuration, _ cluster: ClusterConfiguration) throws {
        guard configuration.chunking.isValid else {
            throw StoreError(code: .invalidArgument, message: "invalid chunking parameters \(configuration.chunking)")
        }
        guard configuration.chunkingThreshold > configuration.chunking.maximumSize else {
            throw StoreError(code: .invalidArgument, message: "the chunking threshold \(configuration.chunkingThreshold) does not exceed the maximum chunk size \(configuration.chunking.maximumSize)")
        }
        guard configuration.chunking.maximumSize <= configuration.limits.maximumBlobSize else {
            throw StoreError(code: .invalidArgument, message: "chunks of up to \(configuration.chunking.maximumSize) bytes exceed the blob limit of \(configuration.limits.maximumBlobSize)")
        }
        guard (Self.inlineLimit ... 1 << 30).contains(cluster.packSizeTarget) else {
            throw StoreError(code: .invalidArgument, message: "the pack size target \(cluster.packSizeTarget) is outside \(Self.inlineLimit)...\(1 << 30)")
        }
    }

    /// In-memory bytes above the threshold, as a chunked blob.
    func putChunked(_ data: Data) throws -> Digest {
        let digest = Digest.sha256(data)
        if try freshen(digest) { return digest }
        var offset = 0
        return try putChunked(knownDigest: digest, prefix: []) { buffer in
            let count = min(buffer.count, data.count - offset)
            data.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset ..< offset + count])) }
            offset += count
            return count
        }
    }

    /// A file, read once: a file up to the threshold is one blob, a larger one is chunked as it is
    /// read, holding a batch at a time.
    func putStreaming(contentsOf file: URL) throws -> Digest {
        let descriptor = Glibc.open(file.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw StoreError(code: .io, message: "cannot open \(file.path): errno \(errno)", path: file.path)
        }
        defer { _ = Glibc.close(descriptor) }
        let readFile = { (buffer: UnsafeMutableRawBufferPointer) throws -> Int in
            while true {
                let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
                if count >= 0 { return count }
                guard errno == EINTR else {
                    throw StoreError(code: .io, message: "cannot read \(file.path): errno \(errno)", path: file.path)
                }
            }
        }
        // One byte past the threshold tells which form the content takes, without a stat that a
        // growing file would contradict.
        let threshold = configuration.chunkingThreshold
        var atEnd = false
        let prefix = try [UInt8](unsafeUninitializedCapacity: threshold + 1) { buffer, count in
            count = 0
            while count <= threshold {
                let got = try readFile(UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[count...]))
                if got == 0 {
                    atEnd = true
                    break
                }
                count += got
            }
        }
        if atEnd { return try put(Data(prefix)) }
        return try putChunked(knownDigest: nil, prefix: prefix, read: readFile)
    }

    /// Stores `prefix` and then what `read` yields (it fills the buffer it is given as far as it can
    /// and returns the count, 0 at the end) as a chunked blob; `knownDigest` is the content's
    /// SHA-256 when the caller has it.
    private func putChunked(knownDigest: Digest?, prefix: [UInt8], read: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> Digest {
        let lease = try takeLease("put")
        defer { withExtendedLifetime(lease) {} }
        let chunker = Chunker(configuration.chunking)
        // The target, the chunk that crosses it, and the index of chunks of the minimum size: the
        // buffer does not grow by copying unless chunks compress far below that size.
        let entries = cluster.packSizeTarget / configuration.chunking.minimumSize + 1
        var upload = ChunkedUpload(pack: PendingPack(capacity: cluster.packSizeTarget + configuration.chunking.maximumSize
                                       + entries * (ClusterPackFormat.entryHeaderSize + ClusterPackFormat.indexRowSize)
                                       + ClusterPackFormat.trailerSize))
        // A pack still uploading when the put ends early (a read error) is waited for: nothing of
        // the put runs on after it returns.
        defer { _ = try? upload.inFlight?.wait() }
        var hasher = SHA256.Hasher()
        if knownDigest == nil { prefix.withUnsafeBytes { hasher.update($0) } }
        var carry = prefix
        var total = UInt64(prefix.count)
        var atEnd = false
        while !atEnd {
            try checkOpen()
            let batch = try [UInt8](unsafeUninitializedCapacity: carry.count + Self.chunkingBatchSize) { buffer, count in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                carry.withUnsafeBytes { raw.copyMemory(from: $0) }
                count = carry.count
                while count < raw.count {
                    let got = try read(UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
                    if got == 0 {
                        atEnd = true
                        break
                    }
                    count += got
                }
            }
            var ranges: [Range<Int>] = []
            var offset = 0
            batch.withUnsafeBytes { raw in
                if knownDigest == nil { hasher.update(UnsafeRawBufferPointer(rebasing: raw[carry.count...])) }
                while let length = chunker.nextChunkLength(in: UnsafeRawBufferPointer(rebasing: raw[offset...]), isFinal: atEnd) {
                    ranges.append(offset ..< offset + length)
                    offset += length
                }
            }
            total += UInt64(batch.count - carry.count)
            carry = Array(batch[offset...])
            try store(ranges, of: batch, into: &upload)
        }
        let computed = hasher.finalize()
        let digest = knownDigest ?? computed
        let (nodes, root) = upload.manifest.finish()
        upload.nodes += nodes.map { NodeRow(digest: $0.digest, encoded: $0.encoded, node: $0.node, contentSize: nil) }
        upload.nodes.append(NodeRow(digest: digest, encoded: root.encoded(), node: root, contentSize: Int64(total)))
        try flush(&upload)
        try upload.inFlight?.wait()
        return digest
    }

    /// The chunks `ranges` of `batch`: those the store holds are freshened (all of the batch in one
    /// statement), the others go into the pending pack, flushed as soon as it is full (a pack
    /// overshoots its target by one chunk, not by a batch); each joins the manifest tree.
    private func store(_ ranges: [Range<Int>], of batch: [UInt8], into upload: inout ChunkedUpload) throws {
        guard !ranges.isEmpty else { return }
        let digests = batch.withUnsafeBytes { raw in ranges.map { Digest.sha256(UnsafeRawBufferPointer(rebasing: raw[$0])) } }
        let held = try freshen(digests)
        upload.settledDigests = []
        for (range, digest) in zip(ranges, digests) {
            if !held.contains(digest) && !upload.pack.holds(digest) && !upload.inFlightDigests.contains(digest)
                && !upload.settledDigests.contains(digest) {
                let (codec, stored) = batch.withUnsafeBytes { encode(UnsafeRawBufferPointer(rebasing: $0[range])) }
                upload.pack.append(digest, logicalSize: range.count, codec: codec, stored: stored)
            }
            let nodes = upload.manifest.append(chunk: ManifestNode.Entry(digest: digest, length: UInt64(range.count)))
            upload.nodes += nodes.map { NodeRow(digest: $0.digest, encoded: $0.encoded, node: $0.node, contentSize: nil) }
            if upload.pack.byteCount >= cluster.packSizeTarget || upload.nodes.count >= Self.pendingNodeLimit {
                try flush(&upload)
            }
        }
    }

    /// The digests among `digests` whose rows exist, freshened (§3.1 step 2, for many at once).
    private func freshen(_ digests: [Digest]) throws -> Set<Digest> {
        let buffers = digests.map(\.buffer)
        return try query("freshen chunks") { connection in
            var held = Set<Digest>()
            let rows = try await connection.query(
                "UPDATE contentstore.blobs SET freshened_at = now() WHERE digest = ANY(\(buffers)) RETURNING digest", logger: self.logger)
            for try await buffer in rows.decode(ByteBuffer.self) { held.insert(try Digest(buffer: buffer, what: "contentstore.blobs")) }
            return held
        }
    }

    /// Starts uploading the pending pack (if any) and inserting the pending nodes in the transaction
    /// that registers it, once the previous flush is done: the nodes' chunks are then in rows before
    /// the nodes that list them. The put fills its next pack meanwhile (hashing and compression
    /// overlap the upload); at most one flush is in flight, so memory holds two packs at most.
    private func flush(_ upload: inout ChunkedUpload) throws {
        try upload.inFlight?.wait()
        upload.inFlight = nil
        upload.settledDigests.formUnion(upload.inFlightDigests)
        upload.inFlightDigests = []
        try checkOpen()
        let nodes = upload.nodes
        upload.nodes = []
        let insertNodes: @Sendable (PostgresConnection) async throws -> Void = { connection in
            for node in nodes { try await self.insertNode(node, on: connection) }
        }
        if upload.pack.isEmpty {
            let database = database
            upload.inFlight = ClusterExecutor.start {
                try await database.run("register manifest nodes") { connection in
                    try await self.inTransaction(connection) { try await insertNodes(connection) }
                }
            }
        } else {
            let (bytes, rows) = upload.pack.take()
            upload.inFlightDigests = Set(rows.map(\.digest))
            upload.inFlight = ClusterExecutor.start {
                try await self.uploadPack(bytes, blobCount: rows.count) { connection, packID in
                    try await self.insertPackedRows(rows, packID: packID, on: connection)
                    try await insertNodes(connection)
                }
            }
        }
    }

    /// Inserts a manifest node inline and, when it is new, adds one reference to each child it
    /// lists, in the caller's transaction. The children are locked by that update, so a collector
    /// deleting one is serialized with it; one already gone means the put lost its chunk, refused.
    private func insertNode(_ node: NodeRow, on connection: PostgresConnection) async throws {
        let children = node.node.entries.map(\.digest)
        let length = Int64(node.encoded.count)
        let rows = try await connection.query("""
            WITH node AS (INSERT INTO contentstore.blobs (digest, logical_size, stored_size, codec, inline_data, children, content_size, \
            ref_count, zero_since, freshened_at) VALUES (\(node.digest.buffer), \(length), \(length), 0, \(ByteBuffer(bytes: node.encoded)), \
            \(Digest.column(children)), \(node.contentSize), 0, now(), now()) \
            ON CONFLICT (digest) DO UPDATE SET freshened_at = now() RETURNING (xmax = 0) AS inserted), \
            kids AS (SELECT c.d, count(*) AS n FROM unnest(\(children.map(\.buffer))) AS c(d) GROUP BY c.d), \
            added AS (UPDATE contentstore.blobs b SET ref_count = b.ref_count + kids.n, zero_since = NULL FROM kids \
            WHERE b.digest = kids.d AND (SELECT inserted FROM node) RETURNING 1) \
            SELECT (SELECT inserted FROM node), (SELECT count(*) FROM added), (SELECT count(*) FROM kids)
            """, logger: logger)
        for try await (inserted, added, distinct) in rows.decode((Bool, Int64, Int64).self) where inserted && added != distinct {
            throw StoreError(code: .corrupted,
                             message: "manifest node \(node.digest) lists \(distinct - added) blob(s) that left the store during the put")
        }
    }
}

/// A manifest node waiting for its row; `contentSize` is set for the root only.
struct NodeRow: Sendable {
    var digest: Digest
    var encoded: [UInt8]
    var node: ManifestNode
    var contentSize: Int64?
}

/// The state of one chunked put between batches.
private struct ChunkedUpload {
    var pack: PendingPack
    var manifest = ManifestBuilder()
    var nodes: [NodeRow] = []
    /// The flush uploading the previous pack, and the chunks in it (not to be packed again).
    var inFlight: PendingResult<Void>?
    var inFlightDigests = Set<Digest>()
    /// Chunks registered by this put since the current batch was freshened (a pack flushed in the
    /// middle of the batch): they have rows now, which the batch's freshening did not see.
    var settledDigests = Set<Digest>()
}
