import ContentStore
import Foundation

extension Store {
    /// Opens the cluster store in `cluster`'s PostgreSQL database and bucket, creating the schema
    /// (and the bucket) on first open; later opens check the schema's version and scan nothing.
    /// Any number of instances may open the same cluster (Docs/cluster.md).
    ///
    /// - Throws: ``StoreError`` with `unavailable` when PostgreSQL or the object store cannot be
    ///   reached (naming the endpoint, never a secret), `invalidArgument` for refused credentials or
    ///   a bad configuration, `unsupportedFormat` for a schema newer than this library's.
    public convenience init(cluster: ClusterConfiguration, configuration: Configuration = .init()) throws {
        let engine = try ClusterEngine(cluster: cluster, configuration: configuration)
        self.init(engine: engine, configuration: configuration, directory: ClusterEngine.name(of: cluster))
    }

    /// ``init(cluster:configuration:)`` without blocking the caller's thread: the opening waits on a
    /// thread of its own.
    public convenience init(cluster: ClusterConfiguration, configuration: Configuration = .init()) async throws {
        let engine = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ClusterEngine, any Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result(catching: { try ClusterEngine(cluster: cluster, configuration: configuration) }))
            }
        }
        self.init(engine: engine, configuration: configuration, directory: ClusterEngine.name(of: cluster))
    }
}
