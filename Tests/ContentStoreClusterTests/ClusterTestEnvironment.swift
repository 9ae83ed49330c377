import ContentStore
import Foundation
import Logging
import PostgresNIO
import Testing
@testable import ContentStoreCluster

/// The real services `make test` starts (Scripts/cluster-services.sh) and exports through
/// environment variables. Absent (a plain `swift test`), the cluster suites are skipped and say why.
struct ClusterTestEnvironment: Sendable {
    var databaseURL: String
    var s3Endpoint: URL
    var accessKeyID: String
    var secretAccessKey: String
    /// Scripts/cluster-services.sh, for tests that start private instances to stop and restart.
    var servicesScript: String

    static let current: ClusterTestEnvironment? = {
        let environment = ProcessInfo.processInfo.environment
        guard let databaseURL = environment["CONTENTSTORE_TEST_DATABASE_URL"],
              let endpoint = environment["CONTENTSTORE_TEST_S3_ENDPOINT"].flatMap(URL.init(string:)),
              let accessKeyID = environment["CONTENTSTORE_TEST_S3_ACCESS_KEY_ID"],
              let secret = environment["CONTENTSTORE_TEST_S3_SECRET_ACCESS_KEY"],
              let script = environment["CONTENTSTORE_TEST_CLUSTER_SERVICES"] else { return nil }
        return ClusterTestEnvironment(databaseURL: databaseURL, s3Endpoint: endpoint, accessKeyID: accessKeyID,
                                      secretAccessKey: secret, servicesScript: script)
    }()

    static let skipMessage: Comment = """
        cluster services not configured: run `make test` (it starts PostgreSQL and an S3 server and sets \
        CONTENTSTORE_TEST_DATABASE_URL, CONTENTSTORE_TEST_S3_*), or `eval "$(Scripts/cluster-services.sh env)"` after \
        `Scripts/cluster-services.sh start`
        """

    static func required() throws -> ClusterTestEnvironment {
        try #require(current, skipMessage)
    }

    // MARK: - A cluster store

    /// The configuration of a cluster store on these services: `database`, a fresh bucket, the
    /// test credentials, and a request timeout generous enough for two loaded cores (a deadline
    /// that fires under load fails a test that asserts nothing about timing).
    func configuration(database: String, endpoint: URL? = nil, requestTimeout: Duration = .seconds(60)) -> ClusterConfiguration {
        var cluster = ClusterConfiguration(databaseURL: database, objectStoreEndpoint: endpoint ?? s3Endpoint,
                                           bucket: Self.uniqueBucket())
        cluster.accessKeyID = accessKeyID
        cluster.secretAccessKey = secretAccessKey
        cluster.requestTimeout = requestTimeout
        return cluster
    }

    // MARK: - Object store

    func s3Configuration(bucket: String, endpoint: URL? = nil, secret: String? = nil) -> S3Client.Configuration {
        S3Client.Configuration(endpoint: endpoint ?? s3Endpoint, bucket: bucket, region: "us-east-1", accessKeyID: accessKeyID,
                               secretAccessKey: secret ?? secretAccessKey, requestTimeout: .seconds(60))
    }

    static func uniqueBucket() -> String { "cs-test-" + UUID().uuidString.lowercased().prefix(18) }

    // MARK: - PostgreSQL

    /// A fresh, empty database on the shared server for one test; dropped by `dropDatabase`.
    func makeDatabase() async throws -> String {
        let name = "cs_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
        try await withAdminClient { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        return databaseURL(database: String(name))
    }

    func dropDatabase(_ url: String) async {
        guard let name = try? DatabaseURL(parsing: url).database else { return }
        try? await withAdminClient { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        }
    }

    func databaseURL(database: String, port: Int? = nil, password: String? = nil) -> String {
        var components = URLComponents(string: databaseURL)!
        components.path = "/" + database
        if let port { components.port = port }
        if let password { components.password = password }
        return components.string!
    }

    /// Runs `body` with a client of the test's own (not the code under test's) on `url`.
    func withClient<T: Sendable>(_ url: String, _ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let parsed = try DatabaseURL(parsing: url)
        let client = PostgresClient(configuration: .init(host: parsed.host, port: parsed.port, username: parsed.user,
                                                         password: parsed.password, database: parsed.database, tls: .disable))
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await client.run(); return nil }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    private func withAdminClient<T: Sendable>(_ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await withClient(databaseURL(database: "postgres"), body)
    }

    // MARK: - Private service instances

    /// Runs Scripts/cluster-services.sh with `arguments`; fails the test when it fails. Output goes
    /// to a file, not a pipe: the servers it starts inherit it and outlive the script. Spawned and
    /// reaped by hand (posix_spawn, waitpid), polling from the task: Foundation's `Process` was
    /// seen never to notice the exit of a script that leaves daemons behind.
    func services(_ arguments: String...) async throws {
        let log = "/tmp/cluster-services-\(UUID().uuidString).log"
        defer { unlink(log) }
        let argv = (["/bin/bash", servicesScript] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, environ)
        guard spawned == 0 else { throw ServicesFailure(description: "posix_spawn of cluster-services.sh failed: \(spawned)") }
        var status: Int32 = 0
        while true {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { break }
            guard waited == 0 || errno == EINTR else { throw ServicesFailure(description: "waitpid failed: \(errno)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        guard status == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw ServicesFailure(description: "cluster-services.sh \(arguments.joined(separator: " ")) failed (status \(status)): \(text)")
        }
    }

    struct ServicesFailure: Error, CustomStringConvertible { var description: String }
}

/// A scratch directory under /tmp (the postgres user must be able to reach it) for private
/// service instances; `stop` (the script's stop subcommand for what was started) runs at the end,
/// whether the body succeeded or not, then the directory is removed.
func withScratchDirectory<T>(stopping stop: String, _ environment: ClusterTestEnvironment,
                             _ body: (String) async throws -> T) async throws -> T {
    let path = "/tmp/contentstore-cluster-test-" + UUID().uuidString.lowercased()
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    do {
        let result = try await body(path)
        try? await environment.services(stop, path)
        try? FileManager.default.removeItem(atPath: path)
        return result
    } catch {
        try? await environment.services(stop, path)
        try? FileManager.default.removeItem(atPath: path)
        throw error
    }
}

/// Retries `body` until it succeeds or `timeout` passes (which bounds only a failing run), then
/// rethrows its last error.
func eventually<T>(within timeout: Duration = .seconds(300), _ body: () async throws -> T) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        do {
            return try await body()
        } catch {
            if ContinuousClock.now >= deadline { throw error }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}
