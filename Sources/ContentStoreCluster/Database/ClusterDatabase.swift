import ContentStore
import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The cluster's PostgreSQL side: a `PostgresClient` pool on postgres-nio's own event loops (a
/// caller's loop or the cooperative pool never waits on a socket), the versioned schema, and the
/// read queries over records.
///
/// Owns three invariants:
/// - The schema is created exactly once, by whichever instance first opens an empty database
///   (under a transaction-scoped advisory lock), and never touched by code that does not
///   understand its version: a newer version is `unsupportedFormat`. Opening reads one row and
///   scans nothing.
/// - Every failure leaves as a `StoreError`: `unavailable` when the server cannot be reached,
///   is shutting down, or does not answer within the request timeout, naming `host:port/database`
///   and never the password; the pool reconnects by itself, so the next call after the server is
///   back succeeds without reopening.
/// - Keys are compared as UTF-8 bytes (`COLLATE "C"`), whatever the database's locale.
package final class ClusterDatabase: Sendable {
    private let url: DatabaseURL
    private let client: PostgresClient
    private let probeConfiguration: PostgresConnection.Configuration
    private let requestTimeout: Duration
    let logger: Logger
    private let runTask: Mutex<Task<Void, Never>?>

    package init(url databaseURL: String, maximumConnections: Int, requestTimeout: Duration,
                 logger: Logger = Logger(label: "ContentStoreCluster.PostgreSQL")) throws {
        let url = try DatabaseURL(parsing: databaseURL)
        guard maximumConnections >= 1 else {
            throw StoreError(code: .invalidArgument, message: "maximumDatabaseConnections must be at least 1, not \(maximumConnections)")
        }
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password,
            database: url.database, tls: Self.tls(url.tlsMode))
        configuration.options.maximumConnections = maximumConnections
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = .seconds(5)
        // Names this process in pg_stat_activity, so `locked` can say who holds the collector lock.
        configuration.options.additionalStartupParameters = [("application_name", Self.applicationName)]
        var probeConfiguration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password,
            database: url.database, tls: try Self.probeTLS(url.tlsMode))
        probeConfiguration.options.connectTimeout = .seconds(5)
        self.probeConfiguration = probeConfiguration
        self.url = url
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.requestTimeout = requestTimeout
        self.logger = logger
        let client = self.client
        // On the cluster's own threads: a blocked caller on the cooperative pool must not stall it.
        self.runTask = Mutex(Task(executorPreference: ClusterExecutor.shared) { await client.run() })
    }

    deinit {
        runTask.withLock { $0?.cancel() }
    }

    /// Closes every connection. Idempotent; calls made afterwards fail with `closed`.
    package func close() async {
        let task = runTask.withLock { task in defer { task = nil }; return task }
        task?.cancel()
        await task?.value
    }

    /// `host:port/database`, as errors name it.
    package var endpoint: String { url.endpoint }

    // MARK: - Schema

    /// Checks the schema, creating it in an empty database. Reads one row when it exists.
    package func open() async throws {
        if let version = try await existingVersion() {
            try check(version)
            return
        }
        try await run("create the schema") { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(\(ClusterSchema.AdvisoryLock.schemaCreation.rawValue))", logger: self.logger)
                // Another instance may have created it while this one waited for the lock.
                if try await self.versionRow(on: connection) != nil { return }
                for statement in ClusterSchema.version1 {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                try await connection.query(
                    "INSERT INTO contentstore.schema_version (version, store_id) VALUES (\(ClusterSchema.currentVersion), \(UUID()))",
                    logger: self.logger)
                self.logger.info("created the cluster schema", metadata: ["database": "\(self.url.redacted)", "version": "\(ClusterSchema.currentVersion)"])
            }
        }
        if let version = try await existingVersion() { try check(version) }
    }

    private func existingVersion() async throws -> Int32? {
        try await run("read the schema version") { connection in try await self.versionRow(on: connection) }
    }

    private func versionRow(on connection: PostgresConnection) async throws -> Int32? {
        // pg_class read with the statement's own snapshot, not `to_regclass`: that one goes through the
        // backend's catalog cache, which keeps a "no such schema" from before this transaction waited
        // for the creation lock (invalidations are taken in at relation locks, not advisory ones), and
        // then sees no table another instance has just created and committed (42P07 on CREATE).
        let exists = try await connection.query("""
            SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
            WHERE n.nspname = 'contentstore' AND c.relname = 'schema_version')
            """, logger: logger)
        for try await present in exists.decode(Bool.self) where !present { return nil }
        let rows = try await connection.query("SELECT version FROM contentstore.schema_version", logger: logger)
        for try await version in rows.decode(Int32.self) { return version }
        throw StoreError(code: .corrupted, message: "PostgreSQL at \(url.endpoint) has a contentstore.schema_version table without its row")
    }

    private func check(_ version: Int32) throws {
        guard version == ClusterSchema.currentVersion else {
            let relation = version > ClusterSchema.currentVersion ? "newer than" : "older than"
            throw StoreError(code: .unsupportedFormat,
                             message: "the cluster schema in PostgreSQL at \(url.endpoint) is version \(version), \(relation) this library's \(ClusterSchema.currentVersion)")
        }
    }

    // MARK: - Records

    /// The keys starting with `prefix`, in UTF-8 byte order: one index range scan.
    package func keys(withPrefix prefix: String) async throws -> [String] {
        try await run("list keys") { connection in
            let rows: PostgresRowSequence
            if prefix.isEmpty {
                rows = try await connection.query("SELECT key FROM contentstore.records ORDER BY key", logger: self.logger)
            } else if let upper = Self.upperBound(ofPrefix: prefix) {
                rows = try await connection.query(
                    "SELECT key FROM contentstore.records WHERE key >= \(prefix) AND key < \(upper) ORDER BY key", logger: self.logger)
            } else {
                rows = try await connection.query(
                    "SELECT key FROM contentstore.records WHERE key >= \(prefix) ORDER BY key", logger: self.logger)
            }
            var keys: [String] = []
            for try await key in rows.decode(String.self) { keys.append(key) }
            return keys
        }
    }

    /// The record under `key`, or nil.
    package func record(forKey key: String) async throws -> Record? {
        try await run("read record") { connection in
            let rows = try await connection.query(
                "SELECT value, refs FROM contentstore.records WHERE key = \(key)", logger: self.logger)
            for try await (value, refs) in rows.decode((ByteBuffer, ByteBuffer).self) {
                return try self.decodeRecord(key: key, value: value, refs: refs)
            }
            return nil
        }
    }

    private func decodeRecord(key: String, value: ByteBuffer, refs: ByteBuffer) throws -> Record {
        var refs = refs
        guard refs.readableBytes % Self.digestSize == 0 else {
            throw StoreError(code: .corrupted, message: "record \"\(key)\" in PostgreSQL at \(url.endpoint) has a references column of \(refs.readableBytes) bytes, not a multiple of \(Self.digestSize)")
        }
        var references: [Digest] = []
        while let bytes = refs.readBytes(length: Self.digestSize) {
            references.append(Digest(hex: Self.hex(bytes))!)
        }
        return Record(value: Data(value.readableBytesView), references: references)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lowercase hex: how `Digest(hex:)` takes a digest (the engine offers no init from bytes).
    static func hex(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `contentstore <host> pid <pid>`, cut to PostgreSQL's 63-byte limit for names.
    static let applicationName: String = {
        let name = "contentstore \(ProcessInfo.processInfo.hostName) pid \(ProcessInfo.processInfo.processIdentifier)"
        return String(decoding: name.utf8.prefix(63), as: UTF8.self)
    }()

    /// The bytes of a SHA-256 digest, as `blobs.digest` and each slice of `records.refs` hold it.
    static let digestSize = 32

    /// The least string greater than every string that starts with `prefix`, in UTF-8 byte order
    /// (which is code point order): the prefix with its last incrementable scalar incremented and
    /// what follows dropped. Nil when every scalar is U+10FFFF (no upper bound is needed).
    static func upperBound(ofPrefix prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var next = last.value + 1
            if next == 0xD800 { next = 0xE000 }  // skip the surrogates, which UTF-8 cannot hold
            if let scalar = Unicode.Scalar(next) {
                scalars.append(scalar)
                var result = String.UnicodeScalarView()
                result.append(contentsOf: scalars)
                return String(result)
            }
        }
        return nil
    }

    // MARK: - Running queries

    /// Runs `body` on a pooled connection, within the request timeout, mapping every failure to
    /// a `StoreError` that names the endpoint and `operation`. Past the timeout the connection is
    /// closed (its query cannot be cancelled otherwise; the pool replaces it) and the call is
    /// `unavailable`; the next call starts afresh.
    package func run<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try checkNotClosed()
        let leased = LeasedConnection()
        do {
            return try await ServiceDeadline.run(within: requestTimeout, check: probeUnlessLeased(leased), onTimeout: { leased.close() }) {
                try await self.client.withConnection { connection in
                    leased.set(connection)
                    return try await body(connection)
                }
            }
        } catch let error as StoreError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw storeError(error, operation: operation)
        }
    }

    /// The blocking twin of ``run(_:_:)`` for the engine's synchronous methods, whose thread waits
    /// anyway: `body` runs in one task on the cluster's executor and the waiting thread's timed
    /// wait is the deadline, so a statement costs one task and no timer (a cold `get` is one such
    /// statement). Same timeout, probe, closing and errors as ``run(_:_:)``.
    package func runWaiting<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) throws -> T {
        try checkNotClosed()
        let leased = LeasedConnection(), outcome = PendingResult<T>(), client = client
        let work = Task(executorPreference: ClusterExecutor.shared) {
            do {
                outcome.set(.success(try await client.withConnection { connection in
                    leased.set(connection)
                    return try await body(connection)
                }))
            } catch {
                outcome.set(.failure(error))
            }
        }
        let started = ContinuousClock.now
        do {
            if let result = try outcome.wait(timeout: min(Self.probeDelay, requestTimeout)) { return result }
            if let check = probeUnlessLeased(leased) {
                let remaining = requestTimeout - (ContinuousClock.now - started)
                try ClusterExecutor.wait { try await ServiceDeadline.run(within: remaining, check.run) }
            }
            if let result = try outcome.wait(timeout: requestTimeout - (ContinuousClock.now - started)) { return result }
            leased.close()
            throw ServiceDeadline.Exceeded(timeout: requestTimeout)
        } catch {
            work.cancel()
            throw storeError(error, operation: operation)
        }
    }

    private func checkNotClosed() throws {
        guard runTask.withLock({ $0 != nil }) else {
            throw StoreError(code: .closed, message: "the connection pool for PostgreSQL at \(url.endpoint) was closed")
        }
    }

    /// The pool retries failed connection attempts and only logs why, so a request waiting for a
    /// connection would wait out the timeout. A request that has none after ``probeDelay`` makes
    /// one direct attempt, which tells at once: refused (`unavailable`) or bad credentials. When it
    /// succeeds, or the request already runs on a connection, the request goes on waiting.
    private func probeUnlessLeased(_ leased: LeasedConnection) -> ServiceDeadline.Check? {
        guard Self.probeDelay < requestTimeout else { return nil }
        return ServiceDeadline.Check(after: Self.probeDelay) {
            if !leased.isSet { try await self.probe() }
        }
    }

    /// `body` on `held`'s connection, within the request timeout, failures mapped as for
    /// ``run(_:_:)``. Past the timeout the held connection is closed: what it carried (a
    /// snapshot's transaction, a session lock) is over, and later calls on it fail at once.
    package func run<T: Sendable>(_ operation: String, on held: HeldConnection,
                                  _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let connection = held.connection
        do {
            return try await ServiceDeadline.run(within: requestTimeout, onTimeout: { let _: EventLoopFuture<Void> = connection.close() }) {
                try await body(connection)
            }
        } catch let error as CancellationError {
            throw error
        } catch {
            throw storeError(error, operation: operation)
        }
    }

    /// A pooled connection held until ``HeldConnection/release()``: for what spans calls (a
    /// snapshot's transaction, the collector's session lock). Failures map as for ``run(_:_:)``.
    package func hold(_ operation: String) async throws -> HeldConnection {
        try checkNotClosed()
        let (connections, handOver) = AsyncThrowingStream<PostgresConnection, any Error>.makeStream()
        let (released, release) = AsyncStream<Void>.makeStream()
        let client = client
        let holder = Task(executorPreference: ClusterExecutor.shared) {
            do {
                try await client.withConnection { connection in
                    handOver.yield(connection)
                    for await _ in released {}
                }
                handOver.finish()
            } catch {
                handOver.finish(throwing: error)
            }
        }
        do {
            return try await withThrowingTaskGroup(of: PostgresConnection?.self) { group in
                group.addTask {
                    for try await connection in connections { return connection }
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: self.requestTimeout)
                    throw ServiceDeadline.Exceeded(timeout: self.requestTimeout)
                }
                defer { group.cancelAll() }
                guard let connection = try await group.next()! else { throw ServiceDeadline.Exceeded(timeout: self.requestTimeout) }
                return HeldConnection(connection: connection, release: release)
            }
        } catch {
            release.finish()
            holder.cancel()
            throw storeError(error, operation: operation)
        }
    }

    /// How long a request may wait for a pooled connection before a direct attempt checks why.
    private static let probeDelay: Duration = .seconds(1)

    private func probe() async throws {
        let connection = try await PostgresConnection.connect(configuration: probeConfiguration, id: 0, logger: logger)
        try? await connection.close()
    }

    private static func probeTLS(_ mode: DatabaseURL.TLSMode) throws -> PostgresConnection.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: return .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
    }

    func storeError(_ error: any Error, operation: String) -> StoreError {
        if let error = error as? StoreError { return error }
        if error is ServiceDeadline.Exceeded {
            return StoreError(code: .unavailable,
                              message: "PostgreSQL at \(url.endpoint) did not answer within \(requestTimeout) (\(operation))", cause: error)
        }
        guard let error = error as? PSQLError else {
            return StoreError(code: .unavailable, message: "PostgreSQL at \(url.endpoint) is unavailable (\(operation))", cause: error)
        }
        let cause = PostgresFailure(error)
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            if Self.unavailableStates.contains(where: { state.hasPrefix($0) }) {
                return StoreError(code: .unavailable, message: "PostgreSQL at \(url.endpoint) is unavailable (\(operation): SQLSTATE \(state))", cause: cause)
            }
            if state == "28P01" || state == "28000" {
                return StoreError(code: .invalidArgument,
                                  message: "PostgreSQL at \(url.endpoint) refused the credentials of user \(url.user) (\(operation))", cause: cause)
            }
            if state == "3D000" {
                return StoreError(code: .notFound, message: "PostgreSQL at \(url.endpoint) has no database \(url.database)", cause: cause)
            }
            return StoreError(code: .io, message: "PostgreSQL at \(url.endpoint) failed to \(operation) (SQLSTATE \(state))", cause: cause)
        case .sslUnsupported:
            return StoreError(code: .invalidArgument, message: "PostgreSQL at \(url.endpoint) does not offer TLS, which sslmode=require asks for", cause: cause)
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return StoreError(code: .invalidArgument,
                              message: "PostgreSQL at \(url.endpoint) refused to authenticate user \(url.user) (\(operation))", cause: cause)
        case .poolClosed:
            return StoreError(code: .closed, message: "the connection pool for PostgreSQL at \(url.endpoint) was closed", cause: cause)
        default:
            return StoreError(code: .unavailable, message: "PostgreSQL at \(url.endpoint) is unavailable (\(operation))", cause: cause)
        }
    }

    /// SQLSTATE classes and codes that mean "the server cannot serve now", not "the request is bad":
    /// connection exceptions (08), operator intervention (57P01 admin shutdown, 57P02 crash
    /// shutdown, 57P03 cannot connect now), insufficient resources (53), and a standby (25006).
    private static let unavailableStates = ["08", "57P01", "57P02", "57P03", "53", "25006"]

    private static func tls(_ mode: DatabaseURL.TLSMode) -> PostgresClient.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(.makeClientConfiguration())
        case .require: return .require(.makeClientConfiguration())
        }
    }
}

/// A PostgreSQL failure as the cause of a `StoreError`: the client's error code and the server's
/// SQLSTATE and message (which name objects, never the password). postgres-nio's own description
/// is deliberately generic, so this keeps what an operator needs.
package struct PostgresFailure: Error, Sendable, CustomStringConvertible {
    package var code: String
    package var sqlState: String?
    package var serverMessage: String?

    init(_ error: PSQLError) {
        code = "\(error.code)"
        sqlState = error.serverInfo?[.sqlState]
        serverMessage = error.serverInfo?[.message]
    }

    package var description: String {
        var text = code
        if let sqlState { text += " SQLSTATE \(sqlState)" }
        if let serverMessage { text += ": \(serverMessage)" }
        return text
    }
}

/// The connection a ``ClusterDatabase/run(_:_:)`` call leased, so its deadline can close it (and
/// its probe knows it has one).
private final class LeasedConnection: Sendable {
    private let connection = Mutex<PostgresConnection?>(nil)

    func set(_ leased: PostgresConnection) { connection.withLock { $0 = leased } }

    var isSet: Bool { connection.withLock { $0 != nil } }

    func close() {
        // The future-returning close: the deadline's callback is synchronous.
        let _: EventLoopFuture<Void>? = connection.withLock { $0 }?.close()
    }
}

/// A held connection whose every statement has the request timeout, for a session of many
/// statements (the collector's): past the timeout the connection is closed and the statement
/// throws `unavailable` (``ClusterDatabase/run(_:on:_:)``).
///
/// Owns one invariant: no row is read outside the deadline. Each statement's rows are all read
/// within its timeout and handed back collected, so a server that stops in the middle of a result
/// ends the statement as `unavailable` instead of leaving the caller waiting on a row sequence.
/// Every statement the collector and the packer make is bounded (a `LIMIT`, a page of a listing,
/// one pack's worth of inline blobs), so collecting holds no more than they would.
package struct BoundedConnection: Sendable {
    let held: HeldConnection
    let database: ClusterDatabase
    /// What the session does, for messages.
    let operation: String

    @discardableResult
    package func query(_ query: PostgresQuery, logger: Logger) async throws -> BoundedRows {
        try await database.run(operation, on: held) { BoundedRows(rows: try await $0.query(query, logger: logger).collect()) }
    }
}

/// The rows of a ``BoundedConnection`` statement, read in full within its deadline.
package struct BoundedRows: Sendable {
    package let rows: [PostgresRow]

    /// Each row decoded as `Column`.
    package func decode<Column: PostgresDecodable>(_ type: Column.Type) throws -> [Column] {
        try rows.map { try $0.decode(Column.self) }
    }

    /// Each row decoded as the tuple `(repeat each Column)`.
    package func decode<each Column: PostgresDecodable>(_ type: (repeat each Column).Type) throws -> [(repeat each Column)] {
        try rows.map { try $0.decode(type) }
    }
}

/// A connection taken out of the pool until ``release()`` (``ClusterDatabase/hold(_:)``).
package final class HeldConnection: Sendable {
    package let connection: PostgresConnection
    private let releaseSignal: AsyncStream<Void>.Continuation

    init(connection: PostgresConnection, release: AsyncStream<Void>.Continuation) {
        self.connection = connection
        self.releaseSignal = release
    }

    deinit { releaseSignal.finish() }

    /// Returns the connection to the pool. Idempotent.
    package func release() { releaseSignal.finish() }
}
