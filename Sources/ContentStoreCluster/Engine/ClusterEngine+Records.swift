import ContentStore
import Foundation
import NIOCore
import PostgresNIO
import Synchronization

/// Records, snapshots and the start of a commit (Docs/cluster.md §4, §5.1).
///
/// Owns "a body saw a consistent state": a `write` body reads the latest committed rows one by one
/// through a ``ReadTracker`` that notes the version of everything it saw; the commit (``CommitQueue``)
/// applies the body's writes only if every one of those reads still holds inside the commit
/// transaction (over rows it locked, or its serializable snapshot), and otherwise runs the body again. A snapshot is one REPEATABLE READ
/// transaction held on a connection of its own, with a lease pinning what it may read.
extension ClusterEngine {
    func record(forKey key: String) throws -> Record? {
        let database = database
        return try wait { try await database.record(forKey: key) }
    }

    func keys(withPrefix prefix: String) throws -> [String] {
        let database = database
        return try wait { try await database.keys(withPrefix: prefix) }
    }

    func makeSnapshot() throws -> Snapshot {
        try snapshot(leased: true)
    }

    func latestView() throws -> Snapshot {
        try snapshot(leased: false)
    }

    private func snapshot(leased: Bool) throws -> Snapshot {
        let database = database
        let pin: SnapshotPin = try wait {
            let held = try await database.hold("take a snapshot")
            do {
                let lease = try await database.run("take a snapshot", on: held) { connection in
                    let lease = leased ? try await self.takeLease("snapshot", on: connection) : nil
                    try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: database.logger)
                    // The snapshot is taken at the transaction's first statement, after the lease's horizon.
                    try await connection.query("SELECT 1", logger: database.logger)
                    return lease
                }
                return SnapshotPin(held: held, lease: lease, database: database)
            } catch {
                held.release()
                throw error
            }
        }
        return Snapshot(records: SnapshotView(pin: pin), engine: pin.lease.map { LeasedBlobReads(engine: self, lease: $0) } ?? self,
                        limits: limits, pin: pin)
    }

    func write<T>(_ body: (inout Transaction) throws -> T) throws -> T {
        try checkOpen()
        while true {
            let tracker = ReadTracker(engine: self)
            var transaction = Transaction(base: tracker, limits: limits)
            let result = try body(&transaction)
            let reads = tracker.reads
            if reads.inconsistent { continue }
            // A rewrite of what the body read commits nothing; a blind one (a key the body did not
            // read) is dropped by the group commit, which reads that row anyway (§5.2), so a blind
            // write costs no read of its own.
            let changes = transaction.pendingChanges.filter { change in
                guard reads.points[change.key] != nil else { return true }
                return change.record != tracker.seen(change.key)
            }
            if changes.isEmpty { return result }
            let member = CommitQueue.Member(reads: reads, changes: changes)
            switch try commitQueue.submit(member, engine: self) {
            case .committed:
                return result
            case .conflict:
                logger.trace("commit conflicted; running the body again", metadata: ["token": "\(member.token)"])
                continue
            case .missingBlob(let digest, let key):
                throw StoreError(code: .missingBlob,
                                 message: "record \"\(key)\" references blob \(digest), which the store does not hold")
            case .failed(let error):
                throw error
            case .lead:
                continue  // never returned: submit leads groups itself
            }
        }
    }

    /// The record under `key` and the commit sequence that wrote it, at READ COMMITTED.
    func versionedRecord(forKey key: String) throws -> (Record, Int64)? {
        try query("read record") { connection in
            let rows = try await connection.query(
                "SELECT value, refs, version FROM contentstore.records WHERE key = \(key)", logger: self.logger)
            for try await (value, refs, version) in rows.decode((ByteBuffer, ByteBuffer, Int64).self) {
                return (Record(value: Data(value.readableBytesView), references: try Digest.list(refs, key: key)), version)
            }
            return nil
        }
    }

    /// The keys starting with `prefix` with their versions, in UTF-8 byte order.
    static func versionedKeys(withPrefix prefix: String, on connection: PostgresConnection, logger: Logger) async throws -> [KeyVersion] {
        let rows: PostgresRowSequence
        if let upper = ClusterDatabase.upperBound(ofPrefix: prefix), !prefix.isEmpty {
            rows = try await connection.query(
                "SELECT key, version FROM contentstore.records WHERE key >= \(prefix) AND key < \(upper) ORDER BY key", logger: logger)
        } else {
            rows = try await connection.query(
                "SELECT key, version FROM contentstore.records WHERE key >= \(prefix) ORDER BY key", logger: logger)
        }
        var keys: [KeyVersion] = []
        for try await (key, version) in rows.decode((String, Int64).self) { keys.append(KeyVersion(key: key, version: version)) }
        return keys
    }
}

/// A key and the commit sequence that last wrote it.
struct KeyVersion: Hashable, Sendable {
    var key: String
    var version: Int64
}

/// What a `write` body read: the version it saw of each key (nil: absent), and each prefix listing.
struct ReadSet: Sendable {
    var points: [String: Int64?] = [:]
    var prefixes: [String: [KeyVersion]] = [:]
    /// A key read twice with two versions: the body saw no single state, so it must run again.
    var inconsistent = false

    /// Whether any read covered one of `keys`.
    func touches(_ keys: Set<String>) -> Bool {
        keys.contains { key in points[key] != nil || prefixes.keys.contains { key.hasPrefix($0) } }
    }
}

/// The view a `write` body reads: the latest committed rows, each read noted in a ``ReadSet``.
///
/// Owns: the read set and the records the body saw change together, under one lock, so a `write`
/// that drops a rewrite of what the body saw compares against the record of the version its read
/// set holds for that key. A key read twice is read from the database twice: the versions must
/// agree, or the body saw no single state and runs again.
final class ReadTracker: RecordView {
    private struct Seen {
        var reads = ReadSet()
        /// The record the body last saw under each key it read.
        var records: [String: Record?] = [:]
    }

    private let engine: ClusterEngine
    private let state = Mutex(Seen())

    init(engine: ClusterEngine) {
        self.engine = engine
    }

    var reads: ReadSet { state.withLock { $0.reads } }

    /// What the body saw under `key` (nil: absent, or never read).
    func seen(_ key: String) -> Record? {
        state.withLock { $0.records[key] ?? nil }
    }

    func record(forKey key: String) throws -> Record? {
        let row = try engine.versionedRecord(forKey: key)
        state.withLock { seen in
            if let version = seen.reads.points[key], version != row?.1 { seen.reads.inconsistent = true }
            seen.reads.points[key] = .some(row?.1)
            seen.records[key] = .some(row?.0)
        }
        return row?.0
    }

    func keys(withPrefix prefix: String) throws -> [String] {
        let engine = engine
        let rows = try engine.query("list keys") { connection in
            try await ClusterEngine.versionedKeys(withPrefix: prefix, on: connection, logger: engine.logger)
        }
        state.withLock { seen in
            if let listed = seen.reads.prefixes[prefix], listed != rows { seen.reads.inconsistent = true }
            seen.reads.prefixes[prefix] = rows
        }
        return rows.map(\.key)
    }
}

/// Keeps a snapshot's transaction (and lease) open while any copy of the snapshot exists.
final class SnapshotPin: Sendable {
    let held: HeldConnection
    let lease: Lease?
    let database: ClusterDatabase

    init(held: HeldConnection, lease: Lease?, database: ClusterDatabase) {
        self.held = held
        self.lease = lease
        self.database = database
    }

    deinit {
        let held = held, database = database
        Task(executorPreference: ClusterExecutor.shared) {
            _ = try? await database.run("end a snapshot", on: held) { try await $0.query("COMMIT", logger: database.logger) }
            held.release()
        }
    }
}

/// The records of one REPEATABLE READ transaction.
struct SnapshotView: RecordView {
    let pin: SnapshotPin

    func record(forKey key: String) throws -> Record? {
        let held = pin.held, database = pin.database
        return try ClusterExecutor.wait {
            try await database.run("read a snapshot's record", on: held) { connection in
                let rows = try await connection.query(
                    "SELECT value, refs FROM contentstore.records WHERE key = \(key)", logger: database.logger)
                for try await (value, refs) in rows.decode((ByteBuffer, ByteBuffer).self) {
                    return Record(value: Data(value.readableBytesView), references: try Digest.list(refs, key: key))
                }
                return nil
            }
        }
    }

    func keys(withPrefix prefix: String) throws -> [String] {
        let held = pin.held, database = pin.database
        return try ClusterExecutor.wait {
            try await database.run("list a snapshot's keys", on: held) { connection in
                try await ClusterEngine.versionedKeys(withPrefix: prefix, on: connection, logger: database.logger).map(\.key)
            }
        }
    }
}
