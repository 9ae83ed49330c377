import ContentStore
import Foundation
import PostgresNIO

/// A commit whose outcome was lost (the connection failed after COMMIT was sent) is resolved here,
/// exactly once (Docs/cluster.md §5.4).
///
/// Every commit inserts its token into `contentstore.commit_tokens` in its own transaction. To
/// resolve, insert the same token marked not-committed: while the lost transaction is still open on
/// the server, that insert waits on its uncommitted unique-index entry, so the answer is final when
/// it comes. Inserted → the commit never happened, and the row now burns the token so it never can.
/// Conflict → the row says what happened.
extension ClusterDatabase {
    /// What became of a commit.
    package enum CommitResolution: Hashable, Sendable {
        /// It committed, as commit `sequence`.
        case committed(sequence: Int64?)
        /// It did not commit, and now never will.
        case notCommitted
    }

    /// Resolves the commit that carried `token`. Safe to call any number of times.
    package func resolveCommit(token: UUID) async throws -> CommitResolution {
        try await run("resolve a commit of unknown outcome") { connection in
            let inserted = try await connection.query(
                "INSERT INTO contentstore.commit_tokens (token, committed) VALUES (\(token), false) ON CONFLICT (token) DO NOTHING RETURNING token",
                logger: self.logger)
            for try await _ in inserted.decode(UUID.self) { return .notCommitted }
            let rows = try await connection.query(
                "SELECT committed, sequence FROM contentstore.commit_tokens WHERE token = \(token)", logger: self.logger)
            for try await (committed, sequence) in rows.decode((Bool, Int64?).self) {
                return committed ? .committed(sequence: sequence) : .notCommitted
            }
            // Deleted between the two statements: only tokens older than the retention go, so a
            // resolution this late cannot tell; say so rather than guess.
            throw StoreError(code: .corrupted,
                             message: "commit token \(token) vanished from PostgreSQL at \(self.endpoint) while being resolved")
        }
    }
}
