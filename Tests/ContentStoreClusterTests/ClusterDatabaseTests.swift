import ContentStore
import Foundation
import PostgresNIO
import Testing
@testable import ContentStoreCluster

/// The PostgreSQL layer against the real server `make test` starts. Each test has a database of
/// its own; the restart tests run a private server, so stopping it disturbs no other test.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterDatabaseTests {
    func withDatabase(_ body: (String, ClusterTestEnvironment) async throws -> Void) async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        do {
            try await body(url, environment)
        } catch {
            await environment.dropDatabase(url)
            throw error
        }
        await environment.dropDatabase(url)
    }

    /// Generous: the whole suite runs in parallel on two cores, and a starved cooperative pool can
    /// fire a timeout before the answer is read. What each test asserts does not depend on it.
    static let timeout: Duration = .seconds(90)

    func open(_ url: String, timeout: Duration = Self.timeout) async throws -> ClusterDatabase {
        let database = try ClusterDatabase(url: url, maximumConnections: 4, requestTimeout: timeout)
        do {
            try await database.open()
        } catch {
            await database.close()
            throw error
        }
        return database
    }

    @Test func firstOpenCreatesTheSchemaAndLaterOpensOnlyCheckIt() async throws {
        try await withDatabase { url, environment in
            let first = try await open(url)
            await first.close()
            let storeID = try await environment.withClient(url) { client in
                var ids: [UUID] = []
                for try await (version, id) in try await client.query("SELECT version, store_id FROM contentstore.schema_version")
                    .decode((Int32, UUID).self) {
                    #expect(version == ClusterSchema.currentVersion)
                    ids.append(id)
                }
                return ids
            }
            #expect(storeID.count == 1)
            let tables = try await environment.withClient(url) { client in
                var names: [String] = []
                for try await name in try await client.query(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'contentstore' ORDER BY 1").decode(String.self) {
                    names.append(name)
                }
                return names
            }
            #expect(tables == ["blobs", "commit_tokens", "instances", "leases", "packs", "records", "schema_version"])

            let second = try await open(url)
            await second.close()
            let idAfter = try await environment.withClient(url) { client in
                var ids: [UUID] = []
                for try await id in try await client.query("SELECT store_id FROM contentstore.schema_version").decode(UUID.self) { ids.append(id) }
                return ids
            }
            #expect(idAfter == storeID)  // not created again
        }
    }

    @Test func instancesOpeningAnEmptyDatabaseAtOnceCreateOneSchema() async throws {
        try await withDatabase { url, environment in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<6 {
                    group.addTask { try await self.open(url).close() }
                }
                try await group.waitForAll()
            }
            let rows = try await environment.withClient(url) { client in
                var count = 0
                for try await _ in try await client.query("SELECT version FROM contentstore.schema_version").decode(Int32.self) { count += 1 }
                return count
            }
            #expect(rows == 1)
        }
    }

    @Test(arguments: [Int32(2), 99])
    func newerSchemaVersionIsRefusedAndLeftUntouched(_ version: Int32) async throws {
        try await withDatabase { url, environment in
            try await open(url).close()
            try await environment.withClient(url) { client in
                _ = try await client.query("UPDATE contentstore.schema_version SET version = \(version)")
                _ = try await client.query("INSERT INTO contentstore.records (key, value, refs, version) VALUES ('kept', '\\x01'::bytea, ''::bytea, 1)")
            }
            let database = try ClusterDatabase(url: url, maximumConnections: 2, requestTimeout: Self.timeout)
            defer { Task { await database.close() } }
            let error = await #expect(throws: StoreError.self) { try await database.open() }
            #expect(error?.code == .unsupportedFormat)
            #expect(error?.message.contains("version \(version)") == true)
            let after = try await environment.withClient(url) { client in
                var state: [String] = []
                for try await v in try await client.query("SELECT version FROM contentstore.schema_version").decode(Int32.self) { state.append("v\(v)") }
                for try await k in try await client.query("SELECT key FROM contentstore.records").decode(String.self) { state.append(k) }
                return state
            }
            #expect(after == ["v\(version)", "kept"])
        }
    }

    static let hostileKeys = ["a", "B", "b", "Z", "é", "e\u{301}", "ä", "aa", "a\u{0}".replacingOccurrences(of: "\u{0}", with: "~"),
                              "ß", "\u{1F600}", "\u{FFFD}", "\u{E000}", "\u{D7FF}", "a/b", "a-b", "A", "\u{10FFFF}", "\u{10FFFF}x", "日本"]

    @Test func keysAreSortedByUTF8BytesWhateverTheLocale() async throws {
        try await withDatabase { url, environment in
            let database = try await open(url)
            defer { Task { await database.close() } }
            try await insert(Self.hostileKeys, into: url, environment)
            let byBytes = Self.hostileKeys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            #expect(try await database.keys(withPrefix: "") == byBytes)
            for prefix in ["a", "e", "\u{10FFFF}", "\u{D7FF}", "日", "none", "B"] {
                let expected = byBytes.filter { Array($0.utf8).starts(with: Array(prefix.utf8)) }
                #expect(try await database.keys(withPrefix: prefix) == expected, "prefix \(prefix)")
            }
        }
    }

    @Test func upperBoundOfPrefix() {
        #expect(ClusterDatabase.upperBound(ofPrefix: "abc") == "abd")
        #expect(ClusterDatabase.upperBound(ofPrefix: "a\u{D7FF}") == "a\u{E000}")
        #expect(ClusterDatabase.upperBound(ofPrefix: "a\u{10FFFF}") == "b")
        #expect(ClusterDatabase.upperBound(ofPrefix: "\u{10FFFF}\u{10FFFF}") == nil)
    }

    @Test func recordsDecodeValueAndReferencesInOrder() async throws {
        try await withDatabase { url, environment in
            let database = try await open(url)
            defer { Task { await database.close() } }
            let a = Digest.sha256(Data("a".utf8)), b = Digest.sha256(Data("b".utf8))
            let refs = [a, b, a].map(\.hex).joined()
            try await environment.withClient(url) { client in
                _ = try await client.query(PostgresQuery(unsafeSQL:
                    "INSERT INTO contentstore.records (key, value, refs, version) VALUES ('doc', '\\x68656c6c6f'::bytea, '\\x\(refs)'::bytea, 7)"))
            }
            #expect(try await database.record(forKey: "doc") == Record(value: Data("hello".utf8), references: [a, b, a]))
            #expect(try await database.record(forKey: "absent") == nil)
        }
    }

    @Test func wrongPasswordIsAClearErrorWithoutThePassword() async throws {
        let environment = try ClusterTestEnvironment.required()
        let password = "wrong-\(UUID().uuidString)"
        let url = environment.databaseURL(database: "postgres", password: password)
        let database = try ClusterDatabase(url: url, maximumConnections: 1, requestTimeout: Self.timeout)
        defer { Task { await database.close() } }
        let error = await #expect(throws: StoreError.self) { try await database.open() }
        #expect(error?.code == .invalidArgument)
        #expect(!"\(error!)".contains(password))
        #expect("\(error!)".contains("127.0.0.1"))
    }

    @Test func unreachableServerIsUnavailableNamingTheEndpoint() async throws {
        let environment = try ClusterTestEnvironment.required()
        let port = try closedPort()
        let url = environment.databaseURL(database: "postgres", port: port)
        let database = try ClusterDatabase(url: url, maximumConnections: 1, requestTimeout: Self.timeout)
        defer { Task { await database.close() } }
        let error = await #expect(throws: StoreError.self) { try await database.open() }
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("127.0.0.1:\(port)/postgres") == true)
        #expect(!"\(error!)".contains("contentstore-test-password"))
    }

    /// A statement the server does not answer in time ends the call at the request timeout (the
    /// client library cannot cancel it), as `unavailable` naming the endpoint; the connection it
    /// held is closed, so the next call on a one-connection pool gets a new one and works.
    @Test(.timeLimit(.minutes(8)))
    func statementPastTheRequestTimeoutIsUnavailableAndTheNextCallWorks() async throws {
        try await withDatabase { url, _ in
            let database = try ClusterDatabase(url: url, maximumConnections: 1, requestTimeout: .seconds(5))
            defer { Task { await database.close() } }
            let error = await #expect(throws: StoreError.self) {
                try await database.run("sleep") { try await $0.query("SELECT pg_sleep(120)", logger: database.logger) }
            }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("did not answer within") == true)
            // The statement would have succeeded: only the deadline can have ended the call.
            #expect(error?.message.contains(try DatabaseURL(parsing: url).endpoint) == true)
            let one = try await eventually(within: .seconds(60)) {
                try await database.run("select") { connection in
                    for try await value in try await connection.query("SELECT 1", logger: database.logger).decode(Int32.self) { return value }
                    return 0
                }
            }
            #expect(one == 1)
        }
    }

    /// A server that stops in the middle of a result (here PostgreSQL itself, asleep after a
    /// few thousand rows of a scan, with more rows to come): a collector's statement on its held
    /// connection ends at the request timeout as `unavailable`, the rows sent before the stall
    /// notwithstanding — the rows are read within the deadline, not after it.
    @Test(.timeLimit(.minutes(8)))
    func aResultThatStallsMidwayOnAHeldConnectionIsUnavailableAtTheTimeout() async throws {
        try await withDatabase { url, _ in
            let database = try ClusterDatabase(url: url, maximumConnections: 2, requestTimeout: .seconds(5))
            defer { Task { await database.close() } }
            let held = try await database.hold("scan")
            defer { held.release() }
            let connection = BoundedConnection(held: held, database: database, operation: "scan")
            // 100-byte rows: the first 4,999 fill PostgreSQL's send buffer many times over, so they
            // reach the client before the backend sleeps on row 5,000 (a subquery of the row's own,
            // run only there).
            let started = ContinuousClock.now
            let error = await #expect(throws: StoreError.self) {
                try await connection.query("""
                    SELECT g, repeat('x', 100), CASE WHEN g = 5000 THEN (SELECT count(*) FROM pg_sleep(120) WHERE g > 0) END \
                    FROM generate_series(1, 10000) AS g
                    """, logger: database.logger)
            }
            let elapsed = ContinuousClock.now - started
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("did not answer within") == true)
            #expect(elapsed < .seconds(60), "the stalled scan took \(elapsed)")
            // The held connection was closed at the deadline; the pool serves the next call.
            let one = try await eventually(within: .seconds(60)) {
                try await database.run("select") { connection in
                    for try await value in try await connection.query("SELECT 1", logger: database.logger).decode(Int32.self) { return value }
                    return 0
                }
            }
            #expect(one == 1)
        }
    }

    @Test func malformedURLsAreInvalidArgumentsThatHideThePassword() {
        for url in ["mysql://u:hunter2@h/db", "postgres://h/db", "postgres://u:hunter2@h", "postgres://u:hunter2@h/db?sslmode=bogus",
                    "postgres://u:hunter2@h/db?application=x", "not a url"] {
            let error = #expect(throws: StoreError.self) { _ = try DatabaseURL(parsing: url) }
            #expect(error?.code == .invalidArgument)
            #expect(!"\(error!)".contains("hunter2"), "\(url)")
        }
        let parsed = try? DatabaseURL(parsing: "postgresql://me:p%40ss@db.example:6543/store?sslmode=require")
        #expect(parsed == DatabaseURL(user: "me", password: "p@ss", host: "db.example", port: 6543, database: "store", tlsMode: .require))
        #expect(parsed?.redacted == "postgres://me@db.example:6543/store")
    }

    @Test func configurationDescriptionRedactsSecrets() {
        var configuration = ClusterConfiguration(databaseURL: "postgres://me:hunter2@db:5432/store",
                                                 objectStoreEndpoint: URL(string: "http://key:pw@s3.local:9000")!, bucket: "b")
        configuration.secretAccessKey = "super-secret-key"
        configuration.accessKeyID = "AKID"
        for text in [configuration.description, configuration.debugDescription, "\(configuration)"] {
            #expect(!text.contains("hunter2"))
            #expect(!text.contains("super-secret-key"))
            #expect(!text.contains("pw@"))
            #expect(text.contains("AKID"))
            #expect(text.contains("postgres://me@db:5432/store"))
        }
    }

    /// `pg_ctl restart -m immediate` (a crash as far as clients can tell) and a full stop: calls
    /// fail with `unavailable`, and the same ClusterDatabase works again once the server is back.
    @Test(.timeLimit(.minutes(8)))
    func restartedOrStoppedServerIsUnavailableThenRecoversWithoutReopening() async throws {
        let environment = try ClusterTestEnvironment.required()
        try await withScratchDirectory(stopping: "stop-postgres", environment) { directory in
            try await environment.services("start-postgres", directory)
            let port = try #require(Int(try String(contentsOfFile: directory + "/postgres/port", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)))
            let url = environment.databaseURL(database: "postgres", port: port)
            let database = try await open(url)
            defer { Task { await database.close() } }
            try await environment.withClient(url) { client in
                _ = try await client.query("INSERT INTO contentstore.records (key, value, refs, version) VALUES ('k', '\\x00'::bytea, ''::bytea, 1)")
            }
            #expect(try await database.keys(withPrefix: "") == ["k"])

            try await environment.services("restart-postgres", directory)
            // Pooled connections died with the old server: the first call may fail, as
            // `unavailable`, and a later one succeeds on a new connection.
            try await eventually(within: .seconds(120)) {
                do {
                    #expect(try await database.keys(withPrefix: "") == ["k"])
                } catch let error as StoreError {
                    #expect(error.code == .unavailable)
                    throw error
                }
            }

            try await environment.services("stop-postgres", directory)
            let error = await #expect(throws: StoreError.self) { try await database.keys(withPrefix: "") }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("127.0.0.1:\(port)/postgres") == true)

            try await environment.services("start-postgres", directory)
            try await eventually(within: .seconds(120)) { () async throws in #expect(try await database.keys(withPrefix: "") == ["k"]) }
            #expect(try await database.record(forKey: "k") == Record(value: Data([0])))
        }
    }

    private func insert(_ keys: [String], into url: String, _ environment: ClusterTestEnvironment) async throws {
        try await environment.withClient(url) { client in
            for key in keys {
                _ = try await client.query("INSERT INTO contentstore.records (key, value, refs, version) VALUES (\(key), ''::bytea, ''::bytea, 1)")
            }
        }
    }

    /// A loopback port nothing listens on (bound, then released).
    private func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(fd, $0, length) == 0, getsockname(fd, $0, &length) == 0 else { throw POSIXError(.EADDRINUSE) }
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
