/// A node of the manifest tree of a chunked blob (Docs/chunking.md, Docs/on-disk-format.md).
///
/// ```
/// node        u8 version (1) | u8 level | u16 0 | u32 entry count | u64 total length | entries
/// entry       digest[32] | u64 length
/// ```
/// A level-0 node (a leaf) lists chunks, each an ordinary blob; a level-n node lists level n−1
/// nodes with the length of content below each. The root is stored under the SHA-256 of the
/// whole content, every other node under ``digest(of:)``, a hash in its own domain, so a node can
/// never be mistaken for a blob a caller put.
///
/// Nodes end where an entry's digest has its low ``boundaryBits`` bits clear (or at
/// ``maximumEntryCount``): the split depends on the entries alone, so two versions of a file that
/// differ in one chunk share every node except those on the path from that chunk to the root.
package struct ManifestNode: Equatable, Sendable {
    package struct Entry: Equatable, Sendable {
        package var digest: Digest
        package var length: UInt64

        package init(digest: Digest, length: UInt64) {
            self.digest = digest
            self.length = length
        }
    }

    package var level: UInt8
    package var entries: [Entry]

    static let version: UInt8 = 1
    static let headerSize = 16
    static let entrySize = 40
    /// A node ends after an entry whose digest has these low bits clear: 32 entries on average.
    static let boundaryBits = 5
    /// A node ends here whatever the digests say, so a node stays below 10 KiB.
    static let maximumEntryCount = 256
    /// Deeper than any blob gets: 256^16 chunks.
    static let maximumLevel: UInt8 = 16
    /// Prefixed to a node's bytes before hashing, for ``digest(of:)``.
    static let domain: [UInt8] = Array("ContentStore manifest node\0".utf8)

    package var totalLength: UInt64 { entries.reduce(0) { $0 &+ $1.length } }

    /// The key of a non-root node: SHA-256 over ``domain`` and the node's bytes.
    package static func digest(of encoded: UnsafeRawBufferPointer) -> Digest {
        var hasher = SHA256.Hasher()
        domain.withUnsafeBytes { hasher.update($0) }
        hasher.update(encoded)
        return hasher.finalize()
    }

    /// Whether a node ends after the entry with `digest`.
    static func endsNode(after digest: Digest) -> Bool {
        digest.withUnsafeBytes { $0[Digest.byteCount - 1] } & UInt8(1 << boundaryBits - 1) == 0
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.headerSize + entries.count * Self.entrySize)
        writer.append(Self.version)
        writer.append(level)
        writer.append(UInt16(0))
        writer.append(UInt32(entries.count))
        writer.append(totalLength)
        for entry in entries {
            writer.append(entry.digest)
            writer.append(entry.length)
        }
        return writer.bytes
    }

    package struct Malformed: Error, CustomStringConvertible { package var description: String }

    /// Decodes a node, checking every field a writer fills: version, counts, lengths and total.
    package static func decode(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> ManifestNode {
        var reader = ByteReader(bytes)
        do {
            guard try reader.read(UInt8.self) == version else { throw Malformed(description: "unknown manifest node version") }
            let level = try reader.read(UInt8.self)
            let reserved = try reader.read(UInt16.self)
            let count = Int(try reader.read(UInt32.self))
            let total = try reader.read(UInt64.self)
            guard level <= maximumLevel, reserved == 0, (1 ... maximumEntryCount).contains(count), reader.remaining == count * entrySize else {
                throw Malformed(description: "manifest node header is invalid")
            }
            var entries: [Entry] = []
            entries.reserveCapacity(count)
            var sum: UInt64 = 0
            for _ in 0 ..< count {
                let entry = Entry(digest: try reader.readDigest(), length: try reader.read(UInt64.self))
                let (added, overflow) = sum.addingReportingOverflow(entry.length)
                guard entry.length > 0, !overflow else { throw Malformed(description: "manifest node entry length is invalid") }
                sum = added
                entries.append(entry)
            }
            guard sum == total else { throw Malformed(description: "manifest node entries add up to \(sum), not \(total)") }
            return ManifestNode(level: level, entries: entries)
        } catch let error as Malformed {
            throw error
        } catch {
            throw Malformed(description: "manifest node ends early")
        }
    }
}

/// Builds a manifest tree bottom-up as chunks arrive, emitting each node once it is complete
/// (children before parents), so a put holds only the unfinished node of each level.
package struct ManifestBuilder {
    /// A finished node, its bytes and the key it is stored under.
    package struct Output {
        package var node: ManifestNode
        package var encoded: [UInt8]
        package var digest: Digest
    }

    private var pending: [[ManifestNode.Entry]] = []
    private var emittedCount: [Int] = []

    package init() {}

    /// Adds the next chunk; returns the nodes that became complete.
    package mutating func append(chunk: ManifestNode.Entry) -> [Output] {
        var output: [Output] = []
        append(chunk, level: 0, into: &output)
        return output
    }

    /// Completes the tree: the nodes still open, then the root (level and entries; its key is the
    /// content's digest, which the caller knows). Requires at least one chunk.
    package mutating func finish() -> (nodes: [Output], root: ManifestNode) {
        var output: [Output] = []
        var level = 0
        while true {
            if level == pending.count - 1 && emittedCount[level] == 0 {
                return (output, ManifestNode(level: UInt8(level), entries: pending[level]))
            }
            if !pending[level].isEmpty { emitNode(level: level, into: &output) }
            level += 1
        }
    }

    private mutating func append(_ entry: ManifestNode.Entry, level: Int, into output: inout [Output]) {
        if pending.count == level {
            pending.append([])
            emittedCount.append(0)
        }
        pending[level].append(entry)
        if ManifestNode.endsNode(after: entry.digest) || pending[level].count == ManifestNode.maximumEntryCount {
            emitNode(level: level, into: &output)
        }
    }

    private mutating func emitNode(level: Int, into output: inout [Output]) {
        let node = ManifestNode(level: UInt8(level), entries: pending[level])
        pending[level] = []
        emittedCount[level] += 1
        let encoded = node.encoded()
        let digest = encoded.withUnsafeBytes { ManifestNode.digest(of: $0) }
        output.append(Output(node: node, encoded: encoded, digest: digest))
        append(ManifestNode.Entry(digest: digest, length: node.totalLength), level: level + 1, into: &output)
    }
}
