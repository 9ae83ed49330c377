import BenchSupport
import ContentStore
import Foundation
import GRDB
import Synchronization

/// A blob ready to insert: digest, raw length, compressed?, stored bytes.
private typealias Prepared = (digest: Data, rawLength: Int, compressed: Bool, stored: Data)

/// SQLite through GRDB, as a user would build a blob store on it: a `blobs` table keyed by the
/// 32-byte SHA-256 digest holding zstd-compressed bytes (raw when compression does not help), a
/// `files` table for the manifest, a `records` table for small records. WAL mode with
/// `synchronous = FULL`, so every commit is durable when it returns, like ContentStore's `.full`.
/// Hashing and compression run on the calling threads, outside the write transaction.
final class SQLiteContender: Contender {
    let name = "SQLite (GRDB)"
    let pool: DatabasePool
    private let pending = Mutex<[Prepared]>([])

    /// `cacheBytes`: each connection's page cache (`PRAGMA cache_size`), nil for SQLite's default (2,000 KiB).
    init(directory: String, cacheBytes: Int? = nil) throws {
        var configuration = Configuration()
        configuration.maximumReaderCount = 4
        if let cacheBytes {
            // A negative cache_size is in KiB rather than pages.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = \(-(cacheBytes >> 10))") }
        }
        pool = try DatabasePool(path: directory + "/store.sqlite", configuration: configuration)
        try pool.writeWithoutTransaction { db in
            // GRDB opens WAL pools with synchronous=NORMAL; durable commits need FULL.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw VerificationFailed(description: "SQLite did not accept synchronous=FULL")
            }
            try db.execute(sql: """
                CREATE TABLE blobs(digest BLOB PRIMARY KEY NOT NULL, rawLength INTEGER NOT NULL,
                                   compressed INTEGER NOT NULL, data BLOB NOT NULL);
                CREATE TABLE files(path TEXT PRIMARY KEY NOT NULL, digest BLOB NOT NULL);
                CREATE TABLE records(key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
                """)
        }
    }

    private func prepare(_ bytes: UnsafeRawBufferPointer) throws -> (Digest, Prepared?) {
        let digest = Digest.sha256(bytes)
        let key = digest.bytes
        let exists = try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM blobs WHERE digest = ?)", arguments: [key]) ?? false
        }
        if exists { return (digest, nil) }
        if let compressed = ZstdCodec.compress(bytes) {
            return (digest, (key, bytes.count, true, Data(compressed)))
        }
        return (digest, (key, bytes.count, false, Data(bytes)))
    }

    private static func insert(_ blobs: [Prepared], _ db: Database) throws {
        let statement = try db.cachedStatement(sql: "INSERT OR IGNORE INTO blobs(digest, rawLength, compressed, data) VALUES (?, ?, ?, ?)")
        for blob in blobs {
            try statement.execute(arguments: [blob.digest, blob.rawLength, blob.compressed, blob.stored])
        }
    }

    func ingest(_ corpus: Corpus, threads: Int) throws {
        let queue = WorkQueue(count: corpus.files.count)
        try runThreads(threads) { [pool] _ in
            var blobs: [Prepared] = []
            var files: [(String, Data)] = []
            func flush() throws {
                try pool.write { db in
                    try Self.insert(blobs, db)
                    let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO files(path, digest) VALUES (?, ?)")
                    for (path, digest) in files { try statement.execute(arguments: [path, digest]) }
                }
                blobs.removeAll(keepingCapacity: true)
                files.removeAll(keepingCapacity: true)
            }
            while let index = queue.next() {
                guard let contents = try POSIX.readFile(corpus.absolutePath(index)) else { continue }
                let (digest, prepared) = try contents.withUnsafeBytes { try self.prepare($0) }
                if let prepared { blobs.append(prepared) }
                files.append((corpus.files[index].path, digest.bytes))
                if files.count == 64 { try flush() }
            }
            if !files.isEmpty { try flush() }
        }
        // Fold the WAL into the database file, as a long-running user of SQLite must.
        _ = try pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
    }

    /// Deletes the rows, deletes blobs no file references, then VACUUMs: SQLite returns no space
    /// to the file system without it.
    func deleteAndCollect(_ paths: [String], diskUsage: () -> UInt64) throws -> [CollectStep] {
        let seconds = try measureSeconds {
            try pool.write { db in
                let statement = try db.cachedStatement(sql: "DELETE FROM files WHERE path = ?")
                for path in paths { try statement.execute(arguments: [path]) }
                try db.execute(sql: "DELETE FROM blobs WHERE digest NOT IN (SELECT digest FROM files)")
            }
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM")
                try db.checkpoint(.truncate)
            }
        }
        return [CollectStep(name: "delete + collect + VACUUM", seconds: seconds, diskBytesAfter: diskUsage())]
    }

    func commit(key: String, value: Data) throws {
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO records(key, value) VALUES (?, ?)", arguments: [key, value])
        }
    }

    func put(_ block: [UInt8]) throws -> Digest {
        let (digest, prepared) = try block.withUnsafeBytes { try prepare($0) }
        guard let prepared else { return digest }
        let batch: [Prepared]? = pending.withLock { pending in
            pending.append(prepared)
            guard pending.count >= 1000 else { return nil }
            defer { pending.removeAll() }
            return pending
        }
        if let batch { try pool.write { try Self.insert(batch, $0) } }
        return digest
    }

    func finishPuts() throws {
        let batch: [Prepared] = pending.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        try pool.write { try Self.insert(batch, $0) }
        _ = try pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
    }

    /// One SELECT per read (a cached statement on a pooled reader), then decompress and verify.
    func read(_ digest: Digest) throws -> Int {
        let key = digest.bytes
        return try pool.read { db in
            let statement = try db.cachedStatement(sql: "SELECT rawLength, compressed, data FROM blobs WHERE digest = ?")
            guard let row = try Row.fetchOne(statement, arguments: [key]) else {
                throw VerificationFailed(description: "SQLite: blob \(digest) missing")
            }
            let rawLength: Int = row[0]
            let compressed: Bool = row[1]
            return try row.withUnsafeData(atIndex: 2) { stored in
                guard let stored else { throw VerificationFailed(description: "SQLite: NULL data") }
                return try verifiedLength(stored, rawLength: rawLength, compressed: compressed, digest: digest)
            }
        }
    }

    func close() throws { try pool.close() }
}

/// Decompresses (when needed) and re-hashes, as ContentStore's verified `get` does.
func verifiedLength(_ stored: Data, rawLength: Int, compressed: Bool, digest: Digest) throws -> Int {
    var raw = Data(count: rawLength)
    try stored.withUnsafeBytes { source in
        try raw.withUnsafeMutableBytes { destination in
            if compressed {
                try ZstdCodec.decompress(source, into: destination)
            } else {
                destination.copyMemory(from: source)
            }
        }
    }
    guard Digest.sha256(raw) == digest else { throw VerificationFailed(description: "blob \(digest) fails verification") }
    return raw.count
}
