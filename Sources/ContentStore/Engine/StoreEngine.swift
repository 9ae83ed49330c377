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
    /// ``Store/write(_:)`` for a caller that must not hold a thread until the commit is durable (the
    /// async twin): runs `body` and commits on the calling thread, and returns its result with the
    /// wait for durability still to come. The default waits here, as ``write(_:)`` does.
    func writeDeferringAcknowledgment<T: Sendable>(_ body: (inout Transaction) throws -> T) throws -> PendingResult<T>
    /// ``writeDeferringAcknowledgment(_:)`` on a thread that must not block (a task's): runs `body` and
    /// commits only if that needs no wait for another transaction, else returns nil without running
    /// `body`. Any I/O the commit needs is handed to `leader`, which runs it on a thread that may block.
    /// The default always returns nil.
    func writeIfUncontended<T: Sendable>(
        _ body: (inout Transaction) throws -> T, leader: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) throws -> PendingResult<T>?

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

    package func writeDeferringAcknowledgment<T: Sendable>(_ body: (inout Transaction) throws -> T) throws -> PendingResult<T> {
        PendingResult(try write(body))
    }

    package func writeIfUncontended<T: Sendable>(
        _ body: (inout Transaction) throws -> T, leader: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) throws -> PendingResult<T>? {
        nil
    }
}

/// A result computed now and due later (a commit's, once it is durable): the value, and how to
/// learn when the caller may have it, without a thread waiting meanwhile.
package struct PendingResult<T: Sendable>: Sendable {
    package let value: T
    /// Calls its argument once `value` is due (nil), or with the error the caller gets instead.
    package let whenDue: @Sendable (_ due: @escaping @Sendable ((any Error)?) -> Void) -> Void

    package init(_ value: T, whenDue: @escaping @Sendable (_ due: @escaping @Sendable ((any Error)?) -> Void) -> Void) {
        self.value = value
        self.whenDue = whenDue
    }

    /// A value due at once.
    package init(_ value: T) {
        self.init(value) { due in due(nil) }
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
