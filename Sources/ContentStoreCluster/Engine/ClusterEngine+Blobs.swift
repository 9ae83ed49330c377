import ContentStore
import Foundation
import NIOCore
import PostgresNIO

/// Blobs (Docs/cluster.md §3): put with upload before registration, verified reads, the caches.
///
/// Owns rule 2 and rule 4 for the cluster: a `blobs` row exists only once the bytes are durable
/// (inline in the row's own committed transaction, or in an uploaded pack whose row turned live in
/// the same transaction as the blob row); `get` never returns bytes that do not hash to the digest.
extension ClusterEngine {
    func put(_ data: Data) throws -> Digest {
        try checkOpen()
        if data.count > configuration.chunkingThreshold { return try putChunked(data) }
        guard data.count <= limits.maximumBlobSize else {
            throw StoreError(code: .limitExceeded, message: "a blob of \(data.count) bytes exceeds the limit of \(limits.maximumBlobSize)")
        }
        let digest = Digest.sha256(data)
        let (codec, stored) = data.withUnsafeBytes { encode($0) }
        let member = PutGroup.Member(digest: digest, logicalSize: data.count, codec: codec, stored: stored)
        try putGroup.submit(member) { group in try self.wait { try await self.storeGroup(group) } }
        return digest
    }

    func put(contentsOf file: URL) throws -> Digest {
        try checkOpen()
        return try putStreaming(contentsOf: file)
    }

    /// A lease of `kind` (§6.2) for a put or export in progress: the collector spares what became
    /// garbage, or was put or freshened, since it was taken, however short the grace period.
    func takeLease(_ kind: String) throws -> Lease {
        let database = database
        return try wait { try await database.run("take a \(kind) lease") { try await self.takeLease(kind, on: $0) } }
    }

    /// §3.1 step 2: true when the store holds `digest`, whose grace period now restarts. The update
    /// takes the row lock, so it serializes with the collector's delete of the row.
    func freshen(_ digest: Digest) throws -> Bool {
        try query("freshen a blob") { connection in
            let rows = try await connection.query(
                "UPDATE contentstore.blobs SET freshened_at = now() WHERE digest = \(digest.buffer) RETURNING 1", logger: self.logger)
            for try await _ in rows.decode(Int32.self) { return true }
            return false
        }
    }

    /// zstd when it saves at least 1/16 of the bytes, raw otherwise (as the embedded store).
    func encode(_ bytes: UnsafeRawBufferPointer) -> (ClusterPackFormat.Codec, [UInt8]) {
        let compressed = Zstd.compress(bytes, level: configuration.compressionLevel)
        if let compressed, compressed.count <= bytes.count - bytes.count / 16 { return (.zstd, compressed) }
        return (.raw, [UInt8](bytes))
    }

    // MARK: - Reads

    func get(_ digest: Digest) throws -> Data {
        try checkOpen()
        if let data = memoryCache.blob(digest) { return data }
        if let data = diskCache?.load(digest) {
            memoryCache.insert(data, for: digest)
            return data
        }
        let data = try read(digest)
        memoryCache.insert(data, for: digest)
        diskCache?.store(data, for: digest)
        return data
    }

    func cachedBlob(_ digest: Digest) throws -> Data? {
        try checkOpen()
        return memoryCache.blob(digest)
    }

    func export(_ digest: Digest, to file: URL) throws {
        try checkOpen()
        // A chunked blob is read over many requests: what becomes garbage meanwhile stays (§6.2).
        let lease = try takeLease("export")
        defer { withExtendedLifetime(lease) {} }
        // The lease spares only what was freshened at or after its horizon: a blob that was already
        // unreferenced when the export began is held from here on (its pieces hang off it).
        guard try memoryCache.blob(digest) != nil || freshen(digest) else {
            throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
        }
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString)")
        do {
            guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
                throw StoreError(code: .io, message: "cannot create \(temporary.path)", path: temporary.path)
            }
            let handle = try FileHandle(forWritingTo: temporary)
            defer { try? handle.close() }
            if let data = memoryCache.blob(digest) {
                try handle.write(contentsOf: data)
            } else {
                try wait { try await self.stream(digest) { try handle.write(contentsOf: $0) } }
            }
            try handle.synchronize()
            guard rename(temporary.path, file.path) == 0 else {
                throw StoreError(code: .io, message: "cannot rename \(temporary.path) to \(file.path): errno \(errno)", path: file.path)
            }
        } catch let error as StoreError {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw StoreError(code: .io, message: "cannot write \(file.path)", path: file.path, cause: error)
        }
    }

    func contains(_ digest: Digest) -> Bool {
        (try? blobRow(digest)) != nil
    }

    func refCount(of digest: Digest) -> Int {
        (try? blobRow(digest))?.refCount ?? 0
    }

    func info(for digest: Digest) -> BlobInfo? {
        guard let row = try? blobRow(digest) else { return nil }
        return BlobInfo(digest: digest, size: row.logicalSize, storedSize: row.storedSize, refCount: row.refCount)
    }

    private struct BlobRow: Sendable {
        var logicalSize: Int
        var storedSize: Int
        var refCount: Int
    }

    /// The committed row of `digest` (always the database, never a cache: §3.3); nil when absent.
    /// A chunked blob's size is its content's, not its root node's.
    private func blobRow(_ digest: Digest) throws -> BlobRow? {
        try query("read a blob's row") { connection in
            let rows = try await connection.query(
                "SELECT coalesce(content_size, logical_size), stored_size, ref_count FROM contentstore.blobs WHERE digest = \(digest.buffer)",
                logger: self.logger)
            for try await (logical, stored, count) in rows.decode((Int64, Int64, Int64).self) {
                return BlobRow(logicalSize: Int(logical), storedSize: Int(stored), refCount: Int(count))
            }
            return nil
        }
    }

    /// ``fetch(_:)`` for a waiting thread. The row is read on this thread's own wait (one
    /// statement: location and inline bytes together); an inline blob — every small blob until the
    /// packer moves it — is decoded and verified right here, so a cold small read is one statement,
    /// one task and no timer. Only a packed or chunked blob goes on to the object store.
    private func read(_ digest: Digest) throws -> Data {
        guard let location = try query("read a blob's location", { try await self.locate(digest, on: $0) }) else {
            throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
        }
        if location.inline != nil, case .blob(let data) = try storedBlob(digest, at: location, packed: nil) { return data }
        return try wait { try await self.fetch(digest, located: location) }
    }

    /// The verified bytes of `digest` from the database or the object store, a chunked blob's
    /// assembled from its chunks; `located` is its row when the caller has just read it.
    func fetch(_ digest: Digest, located: BlobLocation? = nil) async throws -> Data {
        switch try await fetchStored(digest, located: located) {
        case .blob(let data):
            return data
        case .root(let root, let size):
            guard size <= UInt64(limits.maximumGetSize) else {
                throw StoreError(code: .limitExceeded,
                                 message: "blob \(digest) is \(size) bytes, over the get limit of \(limits.maximumGetSize); export it instead")
            }
            var data = Data(capacity: Int(size))
            try await forEachChunk(of: digest, root: root) { data.append($0) }
            return data
        case .node:
            throw StoreError(code: .notFound, message: "blob \(digest) is not in the store")
        }
    }

    /// What the row of `digest` locates, verified. A pack that is gone is looked up once more: the
    /// collector may have moved the blob meanwhile (§3.3).
    func fetchStored(_ digest: Digest, located: BlobLocation? = nil) async throws -> StoredBlob {
        do {
            return try await fetchOnce(digest, located: located)
        } catch let error as StoreError where error.code == .notFound && error.path != nil {
            do {
                return try await fetchOnce(digest)
            } catch let again as StoreError where again.code == .notFound && again.path != nil {
                throw StoreError(code: .corrupted, message: again.message, path: again.path, offset: again.offset, cause: error)
            }
        }
    }

    private func fetchOnce(_ digest: Digest, located: BlobLocation? = nil) async throws -> StoredBlob {
        let found: BlobLocation?
        if let located {
            found = located
        } else {
            found = try await database.run("read a blob's location") { try await self.locate(digest, on: $0) }
        }
        guard let location = found else { throw StoreError(code: .notFound, message: "blob \(digest) is not in the store") }
        guard location.inline == nil, let objectKey = location.objectKey, let offset = location.offset else {
            return try storedBlob(digest, at: location, packed: nil)
        }
        let end = UInt64(offset) + UInt64(ClusterPackFormat.entryHeaderSize) + UInt64(location.storedSize)
        let entry: [UInt8]
        do {
            entry = try await objects.get(objectKey, range: UInt64(offset) ..< end)
        } catch let error as StoreError where error.code == .notFound {
            throw StoreError(code: .notFound, message: "pack object \(objectKey) holding blob \(digest) is missing",
                             path: objectKey, offset: UInt64(offset), cause: error)
        }
        return try storedBlob(digest, at: location, packed: entry)
    }

    /// The row of `digest` with what a read needs, inline bytes included: one statement, prepared
    /// once per connection (every cold read runs it, so PostgreSQL plans it once, not per read).
    func locate(_ digest: Digest, on connection: PostgresConnection) async throws -> BlobLocation? {
        for try await row in try await connection.execute(BlobLocation.Lookup(digest: digest.buffer), logger: logger) {
            return BlobLocation(row)
        }
        return nil
    }

    /// The blob `location` describes, decoded and verified: its inline bytes, or `packed`, its
    /// pack entry as read from the object store.
    private func storedBlob(_ digest: Digest, at location: BlobLocation, packed: [UInt8]?) throws -> StoredBlob {
        guard location.isNode || location.logical <= limits.maximumGetSize else {
            throw StoreError(code: .limitExceeded,
                             message: "blob \(digest) is \(location.logical) bytes, over the get limit of \(limits.maximumGetSize); export it instead")
        }
        guard let codec = ClusterPackFormat.Codec(rawValue: UInt8(clamping: location.codec)) else {
            throw StoreError(code: .corrupted, message: "blob \(digest) has unknown codec \(location.codec) in contentstore.blobs")
        }
        let stored: [UInt8]
        let place: String
        if let inline = location.inline {
            stored = Array(inline.readableBytesView)
            place = "contentstore.blobs.inline_data"
        } else if let packed, let objectKey = location.objectKey, let offset = location.offset {
            let expected = ClusterPackFormat.IndexRow(
                digest: digest.withUnsafeBytes { [UInt8]($0) }, entryOffset: UInt64(offset), logicalLength: UInt64(location.logical),
                storedLength: UInt32(clamping: location.storedSize), codec: codec)
            stored = try ClusterPackFormat.parseEntry(packed, expected: expected, objectKey: objectKey).stored
            place = "pack \(objectKey) at offset \(offset)"
        } else {
            throw StoreError(code: .corrupted, message: "blob \(digest) has no location in contentstore.blobs")
        }
        let data = try decode(stored, codec: codec, logicalSize: Int(location.logical), digest: digest, location: place)
        return try StoredBlob(data, of: digest, isNode: location.isNode, contentSize: location.contentSize, location: place,
                              verifying: configuration.verifiesReads)
    }

    func decode(_ stored: [UInt8], codec: ClusterPackFormat.Codec, logicalSize: Int, digest: Digest, location: String) throws -> Data {
        switch codec {
        case .raw:
            guard stored.count == logicalSize else {
                throw StoreError(code: .corrupted, message: "blob \(digest) in \(location) is \(stored.count) bytes, not \(logicalSize)")
            }
            return Data(stored)
        case .zstd:
            var data = Data(count: logicalSize)
            do {
                try data.withUnsafeMutableBytes { destination in
                    try stored.withUnsafeBytes { try Zstd.decompress(frame: $0, into: destination) }
                }
            } catch {
                throw StoreError(code: .corrupted, message: "blob \(digest) in \(location) does not decompress", cause: error)
            }
            return data
        }
    }
}

/// A `blobs` row as a read needs it: where the bytes are (inline, or a pack object and offset)
/// and what to check them against.
struct BlobLocation: Sendable {
    typealias Row = (Int64, Int64, Int16, ByteBuffer?, String?, Int64?, Bool, Int64?)

    var logical: Int64
    var storedSize: Int64
    var codec: Int16
    var inline: ByteBuffer?
    var objectKey: String?
    var offset: Int64?
    var isNode: Bool
    var contentSize: Int64?

    init(_ row: Row) {
        (logical, storedSize, codec, inline, objectKey, offset, isNode, contentSize) = row
    }

    /// The lookup of one digest's row, as a named prepared statement.
    struct Lookup: PostgresPreparedStatement {
        static let name = "contentstore_locate_blob_v1"
        static let sql = """
            SELECT b.logical_size, b.stored_size, b.codec, b.inline_data, p.object_key, b.pack_offset, b.children IS NOT NULL, b.content_size \
            FROM contentstore.blobs b LEFT JOIN contentstore.packs p ON p.id = b.pack_id WHERE b.digest = $1
            """
        static let bindingDataTypes: [PostgresDataType] = [.bytea]

        var digest: ByteBuffer

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(digest)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
