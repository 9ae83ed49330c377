import Foundation

/// What ``Store`` drives: an engine that keeps the blobs, records and counts. Two conform: the
/// embedded ``LocalEngine`` (a directory of packs and a WAL) and the cluster engine
/// (ContentStoreCluster: PostgreSQL and an S3-compatible object store), so the facades, which see
/// only `Store`, run unchanged on either.
///
/// `Store` checks what it can without the engine (open, key syntax) and delegates the rest; an
/// engine keeps rules 1–7 of DESIGN.md with the semantics the `Store` method of the same name
/// documents, and reports failures as ``StoreError``s. Every method may be called from any thread.
package protocol StoreEngine: AnyObject, Sendable {
    /// ``Store/put(_:)``.
    func put(_ data: Data) throws -> Digest
    /// ``Store/put(_:knownDigest:)``: `digest` is the SHA-256 of `data`, computed by the caller.
    func put(_ data: Data, knownDigest digest: Digest) throws -> Digest
    /// ``Store/put(contentsOf:)``.
    func put(contentsOf file: URL) throws -> Digest
    /// ``Store/get(_:)``.
    func get(_ digest: Digest) throws -> Data
    /// The blob when the engine has it in memory (its read cache), counted as a get; nil when a get
    /// would need I/O. The async `get` answers from here without a thread hop.
    func cachedBlob(_ digest: Digest) throws -> Data?
    /// ``Store/export(_:to:)``.
    func export(_ digest: Digest, to file: URL) throws
    /// ``Store/contains(_:)``.
    func contains(_ digest: Digest) -> Bool
    /// ``Store/refCount(of:)``.
    func refCount(of digest: Digest) -> Int
    /// ``Store/info(for:)``.
    func info(for digest: Digest) -> BlobInfo?

    /// ``Store/record(forKey:)``, for a key ``Store`` has validated.
    func record(forKey key: String) throws -> Record?
    /// ``Store/keys(withPrefix:)``.
    func keys(withPrefix prefix: String) throws -> [String]
    /// ``Store/makeSnapshot()``: a pinned, consistent view.
    func makeSnapshot() throws -> Snapshot
    /// The latest committed records without a pin (``Store/readLatest(_:)``): consistent, but a blob
    /// a newer commit dropped may be collected while the view is read.
    func latestView() throws -> Snapshot
    /// ``Store/write(_:)``. An engine whose commits can conflict with another instance's may run
    /// `body` again on a newer state (DESIGN.md, ContentStoreCluster).
    func write<T>(_ body: (inout Transaction) throws -> T) throws -> T

    /// ``Store/collectGarbage(_:progress:)``.
    func collectGarbage(_ options: GarbageCollectionOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> GarbageCollectionReport
    /// ``Store/checkpoint()``.
    func checkpoint() throws
    /// ``Store/verify(_:progress:)``.
    func verify(_ options: VerificationOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> VerificationReport
    /// ``Store/statistics()``.
    func statistics() throws -> Statistics
    /// ``Store/close()``: idempotent; every later call throws `closed`.
    func close() throws
}

extension StoreEngine {
    /// An engine that gains nothing from a known digest (the cluster's) hashes again.
    package func put(_ data: Data, knownDigest digest: Digest) throws -> Digest {
        try put(data)
    }
}

/// A consistent view of records: what a ``Snapshot`` and a ``Transaction`` read. Keys are validated
/// before they reach it.
package protocol RecordView: Sendable {
    /// The record under `key` in this view.
    func record(forKey key: String) throws -> Record?
    /// The keys starting with `prefix` in this view, ascending by UTF-8 bytes.
    func keys(withPrefix prefix: String) throws -> [String]
}

extension SortedMap: RecordView where Key == String, Value == Record {
    func record(forKey key: String) throws -> Record? { self[key] }
}
