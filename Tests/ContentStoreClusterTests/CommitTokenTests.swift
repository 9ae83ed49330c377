import ContentStore
import Foundation
import Logging
import PostgresNIO
import Testing
@testable import ContentStoreCluster

/// Resolving a commit whose outcome was lost (Docs/cluster.md §5.4), against the real server: the
/// resolution waits for a transaction still in flight, and its answer is final.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct CommitTokenTests {
    enum Ending { case commit, rollBack }
    struct RolledBack: Error {}

    /// A "lost" commit holds its token row uncommitted; a resolution started meanwhile must not
    /// answer until that transaction ends, and then answers what it did.
    @Test(arguments: [Ending.commit, .rollBack])
    func resolutionWaitsForTheTransactionInFlight(_ ending: Ending) async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        defer { Task { await environment.dropDatabase(url) } }
        let database = try ClusterDatabase(url: url, maximumConnections: 4, requestTimeout: ClusterDatabaseTests.timeout)
        defer { Task { await database.close() } }
        try await database.open()
        let token = UUID()
        let resolved = try await environment.withClient(url) { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                let inFlight = AsyncStream<ContinuousClock.Instant>.makeStream()
                group.addTask {
                    do {
                        let logger = Logger(label: "test")
                        try await client.withTransaction(logger: logger) { connection in
                            _ = try await connection.query(
                                "INSERT INTO contentstore.commit_tokens (token, committed, sequence) VALUES (\(token), true, 42)",
                                logger: logger)
                            inFlight.continuation.yield(ContinuousClock.now)
                            try await Task.sleep(for: .seconds(2))
                            if ending == .rollBack { throw RolledBack() }
                        }
                    } catch {
                        // postgres-nio wraps the body's error (PostgresTransactionError) after rolling back.
                        guard ending == .rollBack else { throw error }
                    }
                }
                var inserted = ContinuousClock.now
                for await instant in inFlight.stream { inserted = instant; break }
                let outcome = try await database.resolveCommit(token: token)
                // It waited for the transaction to end (2 s after the insert), rather than answering at
                // once. Measured from the insert: this task may itself wake late on a busy pool.
                #expect(ContinuousClock.now - inserted > .seconds(1))
                try await group.waitForAll()
                return outcome
            }
        }
        switch ending {
        case .commit: #expect(resolved == .committed(sequence: 42))
        case .rollBack: #expect(resolved == .notCommitted)
        }
        // Resolving again answers the same; after a roll-back the token is burned for good.
        #expect(try await database.resolveCommit(token: token) == resolved)
        if ending == .rollBack {
            await #expect(throws: (any Error).self) {
                try await environment.withClient(url) { client in
                    _ = try await client.query("INSERT INTO contentstore.commit_tokens (token, committed) VALUES (\(token), true)")
                }
            }
        }
    }

    @Test func aTokenNoCommitCarriedIsNotCommitted() async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        defer { Task { await environment.dropDatabase(url) } }
        let database = try ClusterDatabase(url: url, maximumConnections: 2, requestTimeout: ClusterDatabaseTests.timeout)
        defer { Task { await database.close() } }
        try await database.open()
        #expect(try await database.resolveCommit(token: UUID()) == .notCommitted)
    }
}
