import Foundation
import Logging
import PostgresNIO
import Synchronization

// The plain-PostgreSQL peer: the same work through postgres-nio, one connection per writer, no
// engine in between. Also the harness's admin statements (CREATE DATABASE, the peer's tables).

enum Peer {
    static let logger = Logger(label: "cluster-compare.peer")

    static func configuration(_ url: String) throws -> PostgresConnection.Configuration {
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user else {
            throw ServicesUnavailable(reason: "cannot parse the database URL of the services")
        }
        return PostgresConnection.Configuration(host: host, port: components.port ?? 5432, username: user,
                                                password: components.password, database: String(components.path.dropFirst()), tls: .disable)
    }

    static func connect(_ url: String, id: Int = 0) async throws -> PostgresConnection {
        try await PostgresConnection.connect(configuration: configuration(url), id: id, logger: logger)
    }

    /// Runs each statement on a fresh connection to `url` (admin work, not timed).
    static func execute(_ url: String, _ statements: [String]) throws {
        try blocking {
            let connection = try await connect(url)
            do {
                for statement in statements { _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
            } catch {
                try? await connection.close()
                throw error
            }
            try await connection.close()
        }
    }

    /// A fresh database on the services' server.
    static func createDatabase(_ services: ClusterServices, _ name: String) throws -> String {
        try execute(services.databaseURL, ["DROP DATABASE IF EXISTS \(name) WITH (FORCE)", "CREATE DATABASE \(name)"])
        return services.databaseURL(database: name)
    }
}

/// Waits on this (non-pool) thread for async work done on the cooperative pool.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

/// The resident and peak resident set of this process, in MiB (/proc/self/status).
func residentMiB() -> (rss: Double, peak: Double) {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Double {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
        let kib = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
        return kib / 1024
    }
    return (field("VmRSS"), field("VmHWM"))
}

extension Data {
    /// The bytes a hex string spells (a digest's 32 bytes, as the peer's key).
    init(hexBytes hex: String) {
        var bytes: [UInt8] = []
        var iterator = hex.utf8.makeIterator()
        func nibble(_ c: UInt8) -> UInt8 { c >= UInt8(ascii: "a") ? c - UInt8(ascii: "a") + 10 : c - UInt8(ascii: "0") }
        while let high = iterator.next(), let low = iterator.next() { bytes.append(nibble(high) << 4 | nibble(low)) }
        self.init(bytes)
    }
}
