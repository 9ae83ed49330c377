import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Reads of chunked blobs (Docs/cluster.md §3.3): the manifest tree walked from its root, the
/// chunks of each leaf fetched with one query and one ranged GET per run of adjacent entries.
///
/// Owns rule 4 for chunked blobs: every node is checked (an inner node against its digest in the
/// node domain, the root against its row's content size), every chunk against its digest and
/// length, and the whole content against the root's digest before the read succeeds. Memory holds
/// one leaf's chunks and one node per level.
extension ClusterEngine {
    /// Calls `sink` with the content of `digest`, chunk by chunk for a chunked blob.
    func stream(_ digest: Digest, into sink: @Sendable (Data) throws -> Void) async throws {
        switch try await fetchStored(digest) {
        case .blob(let data): try sink(data)
        case .root(let root, _): try await forEachChunk(of: digest, root: root, sink)
        case .node: throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
        }
    }

    /// Calls `body` with each chunk of the chunked blob `digest` in order, each verified; with
    /// `verifiesReads`, the whole content is re-hashed against `digest` before this returns.
    func forEachChunk(of digest: Digest, root: ManifestNode, _ body: (Data) throws -> Void) async throws {
        var hasher = SHA256.Hasher()
        try await walk(root, of: digest, hasher: &hasher, body)
        let computed = hasher.finalize()
        if configuration.verifiesReads && computed != digest {
            throw StoreError(code: .corrupted, message: "blob \(digest): its chunks are intact but no longer hash to its digest (its manifest is damaged)")
        }
    }

    private func walk(_ node: ManifestNode, of root: Digest, hasher: inout SHA256.Hasher, _ body: (Data) throws -> Void) async throws {
        guard node.level > 0 else {
            for chunk in try await readLeaf(node, of: root) {
                if configuration.verifiesReads { chunk.withUnsafeBytes { hasher.update($0) } }
                try body(chunk)
            }
            return
        }
        for entry in node.entries {
            try checkOpen()
            guard case .node(let child) = try await fetchStored(entry.digest), child.level == node.level - 1,
                  child.totalLength == entry.length else {
                throw StoreError(code: .corrupted,
                                 message: "blob \(root): manifest node \(entry.digest) is not the level \(node.level - 1) node of \(entry.length) bytes its parent lists")
            }
            try await walk(child, of: root, hasher: &hasher, body)
        }
    }

    private typealias Location = (digest: ByteBuffer, logical: Int64, stored: Int64, codec: Int16, inline: ByteBuffer?, key: String?, offset: Int64?)

    /// The verified chunks a leaf lists, in order: adjacent entries of one pack (a put writes its
    /// chunks in order) come in one ranged GET; an entry whose pack moved is read alone (§3.3).
    private func readLeaf(_ leaf: ManifestNode, of root: Digest) async throws -> [Data] {
        let digests = leaf.entries.map(\.digest.buffer)
        let rows: [Location] = try await database.run("read a chunked blob's locations") { connection in
            var rows: [Location] = []
            for try await row in try await connection.query("""
                SELECT b.digest, b.logical_size, b.stored_size, b.codec, b.inline_data, p.object_key, b.pack_offset \
                FROM contentstore.blobs b LEFT JOIN contentstore.packs p ON p.id = b.pack_id WHERE b.digest = ANY(\(digests))
                """, logger: self.logger).decode((ByteBuffer, Int64, Int64, Int16, ByteBuffer?, String?, Int64?).self) { rows.append(row) }
            return rows
        }
        var located: [Digest: Location] = [:]
        for row in rows { located[try Digest(buffer: row.digest, what: "contentstore.blobs")] = row }
        var chunks: [Data] = []
        chunks.reserveCapacity(leaf.entries.count)
        var index = 0
        while index < leaf.entries.count {
            try checkOpen()
            let run = self.run(from: index, of: leaf.entries, in: located)
            let fetched = (try? await readRun(run.map { leaf.entries[$0] }, in: located)) ?? []
            for (position, entryIndex) in run.enumerated() {
                let entry = leaf.entries[entryIndex]
                let chunk: Data
                if position < fetched.count {
                    chunk = fetched[position]
                } else {
                    do {
                        guard case .blob(let data) = try await fetchStored(entry.digest) else {
                            throw StoreError(code: .corrupted, message: "blob \(root): chunk \(entry.digest) is a manifest node")
                        }
                        chunk = data
                    } catch let error as StoreError where error.code == .notFound {
                        throw StoreError(code: .corrupted, message: "blob \(root): chunk \(entry.digest) is missing from the store", cause: error)
                    }
                }
                guard UInt64(chunk.count) == entry.length else {
                    throw StoreError(code: .corrupted, message: "blob \(root): chunk \(entry.digest) is \(chunk.count) bytes, its manifest says \(entry.length)")
                }
                chunks.append(chunk)
            }
            index += run.count
        }
        return chunks
    }

    /// The indices from `start` on that lie back to back in one pack (at most 8 MiB of them), or
    /// `start` alone.
    private func run(from start: Int, of entries: [ManifestNode.Entry], in located: [Digest: Location]) -> [Int] {
        guard let first = located[entries[start].digest], let key = first.key, var end = first.offset else { return [start] }
        var run: [Int] = []
        var bytes: Int64 = 0
        for index in start ..< entries.count {
            guard let row = located[entries[index].digest], row.key == key, row.offset == end, bytes < 8 << 20 else { break }
            run.append(index)
            end += Int64(ClusterPackFormat.entryHeaderSize) + row.stored
            bytes += Int64(ClusterPackFormat.entryHeaderSize) + row.stored
        }
        return run.isEmpty ? [start] : run
    }

    /// The verified chunks of `entries`: inline, or adjacent in one pack and read with one GET.
    private func readRun(_ entries: [ManifestNode.Entry], in located: [Digest: Location]) async throws -> [Data] {
        guard let first = located[entries[0].digest] else { return [] }
        if let inline = first.inline {
            return [try chunk(Array(inline.readableBytesView), of: entries[0].digest, row: first, location: "contentstore.blobs.inline_data")]
        }
        guard let key = first.key, let start = first.offset else { return [] }
        let rows = entries.compactMap { located[$0.digest] }
        let end = rows.reduce(UInt64(start)) { $0 + UInt64(ClusterPackFormat.entryHeaderSize) + UInt64($1.stored) }
        let bytes = try await objects.get(key, range: UInt64(start) ..< end)
        var chunks: [Data] = []
        var position = 0
        for (entry, row) in zip(entries, rows) {
            let length = ClusterPackFormat.entryHeaderSize + Int(row.stored)
            guard position + length <= bytes.count, let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: row.codec)) else { break }
            let expected = ClusterPackFormat.IndexRow(digest: entry.digest.withUnsafeBytes { [UInt8]($0) }, entryOffset: UInt64(row.offset ?? 0),
                                                      logicalLength: UInt64(row.logical), storedLength: UInt32(clamping: row.stored), codec: codec)
            let parsed = try ClusterPackFormat.parseEntry(Array(bytes[position ..< position + length]), expected: expected, objectKey: key)
            chunks.append(try chunk(parsed.stored, of: entry.digest, row: row, location: "pack \(key) at offset \(row.offset ?? 0)"))
            position += length
        }
        return chunks
    }

    private func chunk(_ stored: [UInt8], of digest: Digest, row: Location, location: String) throws -> Data {
        guard let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: row.codec)) else {
            throw StoreError(code: .corrupted, message: "blob \(digest) has unknown codec \(row.codec) in contentstore.blobs")
        }
        let data = try decode(stored, codec: codec, logicalSize: Int(row.logical), digest: digest, location: location)
        guard case .blob(let verified) = try StoredBlob(data, of: digest, isNode: false, contentSize: nil, location: location,
                                                       verifying: configuration.verifiesReads) else { return data }
        return verified
    }
}

/// What a `blobs` row holds, checked: a blob's bytes, or a parsed manifest node of a chunked blob
/// (its root, with the content's size, or an inner node).
enum StoredBlob: Sendable {
    case blob(Data)
    case root(ManifestNode, size: UInt64)
    case node(ManifestNode)

    /// Checks `data` read for `digest`: a blob hashes to its digest (when `verifying`); a node
    /// parses, an inner node hashes to its digest in the node domain, a root lists `contentSize`
    /// bytes (its digest is the content's, checked when the content is read).
    init(_ data: Data, of digest: Digest, isNode: Bool, contentSize: Int64?, location: String, verifying: Bool) throws {
        guard isNode else {
            if verifying, Digest.sha256(data) != digest {
                throw StoreError(code: .corrupted, message: "blob \(digest) in \(location) does not hash to its digest")
            }
            self = .blob(data)
            return
        }
        let node = try data.withUnsafeBytes { raw -> ManifestNode in
            guard contentSize != nil || ManifestNode.digest(of: raw) == digest else {
                throw StoreError(code: .corrupted, message: "manifest node \(digest) in \(location) does not hash to its digest")
            }
            do {
                return try ManifestNode.decode(raw)
            } catch {
                throw StoreError(code: .corrupted, message: "manifest node \(digest) in \(location) does not parse (\(error))")
            }
        }
        if let contentSize {
            guard node.totalLength == UInt64(contentSize) else {
                throw StoreError(code: .corrupted, message: "blob \(digest): its manifest in \(location) lists \(node.totalLength) bytes, its row \(contentSize)")
            }
            self = .root(node, size: UInt64(contentSize))
        } else {
            self = .node(node)
        }
    }
}
