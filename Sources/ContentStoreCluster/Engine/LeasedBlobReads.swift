import ContentStore
import Foundation

/// The engine a leased snapshot reads its blobs through (Docs/cluster.md §6.2).
///
/// Owns one invariant: a snapshot never reads a blob once its lease may have expired in the
/// database, since the collector may have removed what the lease pinned. Every blob read checks
/// the lease first (``Lease/checkHeld()``); everything else is the cluster engine's own.
final class LeasedBlobReads: StoreEngine {
    private let engine: ClusterEngine
    private let lease: Lease

    init(engine: ClusterEngine, lease: Lease) {
        self.engine = engine
        self.lease = lease
    }

    func get(_ digest: Digest) throws -> Data {
        try lease.checkHeld()
        return try engine.get(digest)
    }

    func cachedBlob(_ digest: Digest) throws -> Data? {
        try lease.checkHeld()
        return try engine.cachedBlob(digest)
    }

    func export(_ digest: Digest, to file: URL) throws {
        try lease.checkHeld()
        try engine.export(digest, to: file)
    }

    func put(_ data: Data) throws -> Digest { try engine.put(data) }
    func put(contentsOf file: URL) throws -> Digest { try engine.put(contentsOf: file) }
    func contains(_ digest: Digest) -> Bool { engine.contains(digest) }
    func refCount(of digest: Digest) -> Int { engine.refCount(of: digest) }
    func info(for digest: Digest) -> BlobInfo? { engine.info(for: digest) }
    func record(forKey key: String) throws -> Record? { try engine.record(forKey: key) }
    func keys(withPrefix prefix: String) throws -> [String] { try engine.keys(withPrefix: prefix) }
    func makeSnapshot() throws -> Snapshot { try engine.makeSnapshot() }
    func latestView() throws -> Snapshot { try engine.latestView() }
    func write<T>(_ body: (inout Transaction) throws -> T) throws -> T { try engine.write(body) }
    func collectGarbage(_ options: GarbageCollectionOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> GarbageCollectionReport {
        try engine.collectGarbage(options, progress: progress)
    }
    func checkpoint() throws { try engine.checkpoint() }
    func verify(_ options: VerificationOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> VerificationReport {
        try engine.verify(options, progress: progress)
    }
    func statistics() throws -> Statistics { try engine.statistics() }
    func close() throws { try engine.close() }
}
