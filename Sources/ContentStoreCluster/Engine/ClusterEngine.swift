import ContentStore
import Foundation
import NIOCore
import Logging
import PostgresNIO
import Synchronization

/// The cluster engine: ``Store`` on PostgreSQL (records, references, counts, blob locations,
/// coordination) and an S3-compatible object store (blob bytes in packs), shared by any number of
/// instances (Docs/cluster.md).
///
/// Its parts, each in a file of its own: blobs (ClusterEngine+Blobs: put, upload before commit,
/// verified reads, the caches; PutGroup and ClusterEngine+PutGroup: concurrent puts stored in
/// groups; ClusterEngine+ChunkedPut: chunked and streaming puts), records and commits (ClusterEngine+Records, GroupCommitter),
/// collection (ClusterEngine+Collection), verify and statistics (ClusterEngine+Verification).
///
/// Owns the instance's lifecycle: every call after ``close()`` throws `closed`; the instance's
/// row and its leases are renewed while it is open, so a killed instance's pins expire. The
/// blocking methods wait on the caller's thread for work on the cluster's own threads
/// (``ClusterExecutor``); postgres-nio and async-http-client keep their sockets on their own
/// event loops. No state in memory grows with the number of blobs or records in the cluster.
final class ClusterEngine: StoreEngine {
    let configuration: Store.Configuration
    let cluster: ClusterConfiguration
    let database: ClusterDatabase
    let objects: any ObjectStore
    /// This instance in `contentstore.instances` and `contentstore.leases`.
    let instanceID: UUID
    let memoryCache: BlobCache
    let diskCache: ClusterDiskCache?
    /// Queued commits of this instance, committed in groups (ClusterEngine+Records).
    let commitQueue = CommitQueue()
    /// Queued single-blob puts of this instance, stored in groups (ClusterEngine+PutGroup).
    let putGroup: PutGroup
    /// Until when each of this instance's leases surely holds (§6.2).
    let leases: LeaseClock
    private let isOpen = Atomic<Bool>(true)
    private let renewal = Mutex<Task<Void, Never>?>(nil)

    var logger: Logger { configuration.logger }
    var limits: Store.Limits { configuration.limits }

    /// Blobs whose stored form is at most this many bytes live in `blobs.inline_data` (§3.1).
    static let inlineLimit = 64 * 1024

    /// Opens the cluster: checks (or creates) the schema and the bucket, registers the instance.
    init(cluster: ClusterConfiguration, configuration: Store.Configuration) throws {
        guard (1 ... 22).contains(configuration.compressionLevel) else {
            throw StoreError(code: .invalidArgument, message: "compression level \(configuration.compressionLevel) is outside 1...22")
        }
        guard configuration.garbageGracePeriod >= .zero else {
            throw StoreError(code: .invalidArgument, message: "the grace period is negative")
        }
        guard cluster.leaseDuration > .zero, cluster.requestTimeout > .zero, cluster.commitResolutionTimeout >= .zero else {
            throw StoreError(code: .invalidArgument,
                             message: "leaseDuration and requestTimeout must be positive and commitResolutionTimeout not negative")
        }
        try Self.validateChunking(configuration, cluster)
        let database = try ClusterDatabase(url: cluster.databaseURL, maximumConnections: cluster.maximumDatabaseConnections,
                                           requestTimeout: cluster.requestTimeout, logger: configuration.logger)
        let objects: S3Client
        do {
            objects = try S3Client(configuration: .init(
                endpoint: cluster.objectStoreEndpoint, bucket: cluster.bucket, region: cluster.region,
                accessKeyID: cluster.accessKeyID, secretAccessKey: cluster.secretAccessKey, requestTimeout: cluster.requestTimeout),
                logger: configuration.logger)
        } catch {
            try? ClusterExecutor.wait { await database.close() }
            throw error
        }
        let instanceID = UUID()
        self.configuration = configuration
        self.cluster = cluster
        self.database = database
        self.objects = objects
        self.instanceID = instanceID
        leases = LeaseClock(life: cluster.leaseDuration)
        memoryCache = BlobCache(capacity: configuration.readCacheSize)
        putGroup = PutGroup(byteLimit: cluster.packSizeTarget)
        diskCache = cluster.cacheDirectory.map(ClusterDiskCache.init(directory:))
        do {
            try ClusterExecutor.wait {
                // The object store first: refused credentials there must leave the database untouched.
                try await objects.createBucketIfMissing()
                try await database.open()
                _ = try await database.run("register the instance") { connection in
                    _ = try await connection.query("""
                        INSERT INTO contentstore.instances (id, host, pid) VALUES (\(instanceID), \(ProcessInfo.processInfo.hostName), \
                        \(Int32(ProcessInfo.processInfo.processIdentifier)))
                        """, logger: database.logger)
                }
            }
        } catch {
            isOpen.store(false, ordering: .releasing)
            try? ClusterExecutor.wait {
                try? await objects.shutdown()
                await database.close()
            }
            throw error
        }
        startRenewal()
        logger.debug("opened cluster store", metadata: ["cluster": "\(cluster)", "instance": "\(instanceID)"])
    }

    deinit {
        try? close()
    }

    /// `database bucket`, as the store's ``Store/directory`` names it in messages.
    static func name(of cluster: ClusterConfiguration) -> URL {
        let database = (try? DatabaseURL(parsing: cluster.databaseURL).endpoint) ?? "database"
        return URL(fileURLWithPath: "/cluster/\(database)/\(cluster.bucket)")
    }

    func close() throws {
        guard isOpen.exchange(false, ordering: .acquiringAndReleasing) else { return }
        renewal.withLock { $0.take() }?.cancel()
        let database = database, objects = objects, instanceID = instanceID, timeout = cluster.requestTimeout
        try ClusterExecutor.wait {
            // Best effort: an unreachable server must not stop the close; leases expire anyway.
            _ = try? await database.run("unregister the instance") { connection in
                try await connection.query("DELETE FROM contentstore.leases WHERE instance_id = \(instanceID)", logger: database.logger)
                try await connection.query("DELETE FROM contentstore.instances WHERE id = \(instanceID)", logger: database.logger)
            }
            // Shutting the clients down waits for their connections; a dead server must not hold the close.
            _ = try? await ServiceDeadline.run(within: timeout) { try await objects.shutdown() }
            _ = try? await ServiceDeadline.run(within: timeout) { await database.close() }
        }
    }

    func checkOpen() throws {
        guard isOpen.load(ordering: .acquiring) else { throw StoreError(code: .closed, message: "the store is closed") }
    }

    /// Runs `body` on the cluster's threads and waits for it, once the store is known to be open.
    func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        try checkOpen()
        return try ClusterExecutor.wait(body)
    }

    /// `body` on a pooled connection, waited for on this thread (``ClusterDatabase/runWaiting(_:_:)``:
    /// one task, this thread's wait the deadline).
    func query<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) throws -> T {
        try checkOpen()
        return try database.runWaiting(operation, body)
    }

    func checkpoint() throws {
        // PostgreSQL checkpoints its own WAL; the engine has nothing of its own to fold.
        try checkOpen()
    }

    // MARK: - Leases

    /// Renews the instance's leases and heartbeat every quarter of a lease's life, so a lease
    /// survives three failed renewals in a row.
    private func startRenewal() {
        let database = database, instanceID = instanceID, leases = leases
        let task = Task(executorPreference: ClusterExecutor.shared) {
            while !Task.isCancelled {
                try? await Task.sleep(for: leases.life / 4)
                if Task.isCancelled { break }
                let covered = leases.current(), sent = ContinuousClock.now
                do {
                    try await database.run("renew leases") { connection in
                        try await connection.query(
                            "UPDATE contentstore.leases SET expires_at = now() + make_interval(secs => \(leases.lifeSeconds)) WHERE instance_id = \(instanceID)",
                            logger: database.logger)
                        try await connection.query(
                            "UPDATE contentstore.instances SET heartbeat_at = now() WHERE id = \(instanceID)", logger: database.logger)
                    }
                    leases.renewed(covered, sentAt: sent)
                } catch {
                    database.logger.warning("could not renew the instance's leases", metadata: ["error": "\(error)"])
                }
            }
        }
        renewal.withLock { $0 = task }
    }

    /// Takes a lease of `kind` whose horizon is the database's now (§6.2): collection spares every
    /// blob that became garbage after it until ``Lease`` goes away.
    func takeLease(_ kind: String, on connection: PostgresConnection) async throws -> Lease {
        let id = UUID(), sent = ContinuousClock.now
        try await connection.query("""
            INSERT INTO contentstore.leases (id, instance_id, kind, horizon, expires_at) \
            VALUES (\(id), \(instanceID), \(kind), now(), now() + make_interval(secs => \(leases.lifeSeconds)))
            """, logger: logger)
        leases.taken(id, sentAt: sent)
        return Lease(id: id, kind: kind, database: database, clock: leases)
    }
}

/// A row in `contentstore.leases`, deleted when the last reference to this object goes.
final class Lease: Sendable {
    let id: UUID
    let kind: String
    private let database: ClusterDatabase
    private let clock: LeaseClock

    init(id: UUID, kind: String, database: ClusterDatabase, clock: LeaseClock) {
        self.id = id
        self.kind = kind
        self.database = database
        self.clock = clock
    }

    /// Throws `unavailable` once the lease may have expired in the database (``LeaseClock``).
    func checkHeld() throws {
        try clock.checkHeld(id, what: kind, database: database.endpoint)
    }

    deinit {
        clock.ended(id)
        let database = database, id = id
        Task(executorPreference: ClusterExecutor.shared) {
            _ = try? await database.run("end a lease") { connection in
                try await connection.query("DELETE FROM contentstore.leases WHERE id = \(id)", logger: database.logger)
            }
        }
    }
}

extension Digest {
    /// The digest's 32 bytes, as `bytea` columns hold them.
    var buffer: ByteBuffer { withUnsafeBytes { ByteBuffer(bytes: $0) } }

    /// The digest in a `bytea` column.
    init(buffer: ByteBuffer, what: @autoclosure () -> String) throws {
        guard buffer.readableBytes == Digest.byteCount else {
            throw StoreError(code: .corrupted, message: "\(what()) holds a digest of \(buffer.readableBytes) bytes, not \(Digest.byteCount)")
        }
        self = buffer.withUnsafeReadableBytes { Digest(bytes: $0) }
    }

    /// The concatenated digests of a `records.refs` column.
    static func list(_ buffer: ByteBuffer, key: String) throws -> [Digest] {
        guard buffer.readableBytes % Digest.byteCount == 0 else {
            throw StoreError(code: .corrupted,
                             message: "record \"\(key)\" has a references column of \(buffer.readableBytes) bytes, not a multiple of \(Digest.byteCount)")
        }
        return buffer.withUnsafeReadableBytes { bytes in
            stride(from: 0, to: bytes.count, by: Digest.byteCount).map { Digest(bytes: UnsafeRawBufferPointer(rebasing: bytes[$0 ..< $0 + Digest.byteCount])) }
        }
    }

    /// `digests` concatenated, as `records.refs` holds them.
    static func column(_ digests: [Digest]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(digests.count * Digest.byteCount)
        for digest in digests { digest.withUnsafeBytes { _ = buffer.writeBytes($0) } }
        return buffer
    }
}
