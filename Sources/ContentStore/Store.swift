import Foundation
import Synchronization

/// A content-addressed blob store with transactional records, exact reference counts and
/// garbage collection. See Docs/architecture.md.
///
/// `Store` is `Sendable`: any number of threads may put, get, read and write at once. Hashing and
/// compression run outside every lock; concurrent commits share one `fsync` (group commit). One
/// process at a time opens a store (an OS file lock on `LOCK`).
///
/// `Store` is the face: each method checks its arguments and delegates to the engine behind it
/// (``StoreEngine``): the embedded engine in a directory, or the cluster engine.
public final class Store: Sendable {
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// The store's directory.
    public let directory: URL
    /// The engine that keeps the data.
    package let engine: any StoreEngine
    /// What tests substituted (``Seams``); the defaults otherwise.
    let seams: Seams
    /// The threads the async API runs blocking work on (Async/IOThreadPool.swift).
    let ioThreads = IOThreadPool()
    /// The control socket's server while an embedded store is open (Control/ControlServer.swift).
    let control = Mutex<ControlServer?>(nil)

    /// Opens the store in `directory`, creating it when the directory is missing or empty, and
    /// recovers: loads the newest checkpoint and replays the WAL written after it. A torn write at the
    /// end of the log is cut off; damage anywhere else is `corrupted`, naming the file and offset.
    ///
    /// - Throws: ``StoreError`` with `locked` (naming the process) when another process has the store
    ///   open, `unsupportedFormat` for a directory that is not a store or a newer format version,
    ///   `invalidArgument` for a configuration out of range.
    public convenience init(at directory: URL, configuration: Configuration = .init()) throws {
        try self.init(at: directory, configuration: configuration, seams: Seams())
    }

    /// ``init(at:configuration:)`` with what a test substitutes inside the store.
    package convenience init(at directory: URL, configuration: Configuration, seams: Seams) throws {
        let engine = try LocalEngine(at: directory, configuration: configuration, seams: seams)
        self.init(engine: engine, configuration: configuration, directory: engine.directory, seams: seams)
        if configuration.controlSocket { control.withLock { $0 = ControlServer.start(for: self) } }
    }

    /// A store driving `engine` (the cluster engine's initializer comes here), which was opened with
    /// `configuration`; `directory` names it in messages and to the facades' shared-store registries.
    package init(engine: any StoreEngine, configuration: Configuration, directory: URL, seams: Seams = Seams()) {
        self.engine = engine
        self.configuration = configuration
        self.directory = directory
        self.seams = seams
    }

    deinit {
        try? close()
    }

    /// Makes everything written durable, waits for background maintenance, and releases the store.
    /// A store in a directory whose log holds more than a sixteenth of
    /// ``Configuration/checkpointThreshold`` since the last checkpoint writes one first, so the
    /// next open replays little.
    /// Idempotent; every later call on this instance throws `closed`.
    public func close() throws {
        control.withLock { $0.take() }?.stop()
        try engine.close()
    }

    static let closedError = StoreError(code: .closed, message: "the store is closed")

    // MARK: Blobs

    /// Stores `data` as a blob and returns its digest. Storing bytes the store already holds writes
    /// nothing and restarts the blob's grace period if it is unreferenced.
    ///
    /// A blob is durable once a commit that follows the put returns (or the store is closed). Until a
    /// record references it, collection removes it after the grace period. Data above
    /// ``Configuration/chunkingThreshold`` is stored as content-defined chunks (Docs/chunking.md).
    ///
    /// - Throws: `limitExceeded` for a blob (or chunk) over ``Limits/maximumBlobSize``; `closed`; I/O errors.
    @discardableResult
    public func put(_ data: Data) throws -> Digest {
        try engine.put(data)
    }

    /// ``put(_:)`` of bytes whose SHA-256 the caller has just computed (a facade that needed the
    /// digest before the put), so the engine does not hash them again.
    ///
    /// Package access only, never public: a wrong `digest` would store bytes under another
    /// content's name. Callers pass exactly `Digest.sha256(data)` of the same bytes.
    @discardableResult
    package func put(_ data: Data, knownDigest digest: Digest) throws -> Digest {
        try engine.put(data, knownDigest: digest)
    }

    /// The bytes of the blob with `digest`. Recently got blobs come from the read cache
    /// (``Configuration/readCacheSize``), which holds only bytes verified as they were read.
    ///
    /// - Throws: `notFound` if the store does not hold it; `limitExceeded` if it is larger than
    ///   ``Limits/maximumGetSize`` (``export(_:to:)`` streams it instead); `corrupted`, naming the
    ///   pack and offset (and for a chunked blob the damaged chunk), if the stored bytes fail their
    ///   checksum or (with ``Configuration/verifiesReads``) no longer hash to `digest`. Wrong bytes
    ///   are never returned.
    public func get(_ digest: Digest) throws -> Data {
        try engine.get(digest)
    }

    /// Whether the store holds the blob.
    public func contains(_ digest: Digest) -> Bool {
        engine.contains(digest)
    }

    /// How many record references point at the blob (0 for unknown blobs).
    public func refCount(of digest: Digest) -> Int {
        engine.refCount(of: digest)
    }

    /// Size and reference count of a blob, or nil when the store does not hold it. No I/O.
    public func info(for digest: Digest) -> BlobInfo? {
        engine.info(for: digest)
    }

    /// Stores the contents of a file as a blob, reading it in pieces: memory stays bounded whatever
    /// the file's size (a file above ``Configuration/chunkingThreshold`` is chunked as it is read;
    /// its digest is still the SHA-256 of the whole content).
    @discardableResult
    public func put(contentsOf file: URL) throws -> Digest {
        try engine.put(contentsOf: file)
    }

    /// Writes a blob to `file`: to a temporary file beside it, synced, then renamed into place. A
    /// chunked blob is written chunk by chunk, so memory stays bounded whatever its size.
    public func export(_ digest: Digest, to file: URL) throws {
        try engine.export(digest, to: file)
    }

    // MARK: Records

    /// The latest committed record under `key`, or nil.
    public func record(forKey key: String) throws -> Record? {
        try Store.validate(key: key, limits: configuration.limits)
        return try engine.record(forKey: key)
    }

    /// The committed keys that start with `prefix`, in ascending order.
    public func keys(withPrefix prefix: String) throws -> [String] {
        try engine.keys(withPrefix: prefix)
    }

    /// Runs `body` with one consistent snapshot of the records. Writers are not blocked.
    public func read<T>(_ body: (Snapshot) throws -> T) throws -> T {
        try body(try makeSnapshot())
    }

    /// A snapshot that stays consistent, and keeps the blobs it references from collection, for as
    /// long as it (or a copy) exists. ``read(_:)`` is the scoped form; use this for readers that
    /// outlive one call, such as a lazy iterator.
    public func makeSnapshot() throws -> Snapshot {
        try engine.makeSnapshot()
    }

    /// Runs `body` on the latest committed records without registering a snapshot, which costs the
    /// engine's central lock and a registration: for short reads from threads that contend for it.
    ///
    /// The records `body` sees are one consistent state, and a blob it gets is right or `notFound`:
    /// without a pin, a blob that a newer commit dropped can be collected meanwhile (once its grace
    /// period has passed). Then `body` runs again on a snapshot (``read(_:)``), so it sees what
    /// ``read(_:)`` would have; it may run twice and must have no other effects.
    package func readLatest<T>(_ body: (Snapshot) throws -> T) throws -> T {
        let latest = try engine.latestView()
        seams.afterTakingUnpinnedView?(self)
        do {
            return try body(latest)
        } catch let error as StoreError where error.code == .notFound {
            return try read(body)
        }
    }

    /// Runs `body` as one atomic transaction and commits what it changed.
    ///
    /// All or nothing: if `body` throws, nothing is committed. With ``Durability/full`` the commit is
    /// on stable storage when `write` returns. Transactions run one at a time, each seeing the last.
    ///
    /// - Throws: `missingBlob` if a record references a digest the store does not hold (nothing is
    ///   committed), `limitExceeded` / `invalidArgument` for bad keys and values, or what `body` threw.
    @discardableResult
    public func write<T>(_ body: (inout Transaction) throws -> T) throws -> T {
        try engine.write(body)
    }

    // MARK: Maintenance

    /// Removes blobs that have been unreferenced for at least the grace period, then rewrites packs
    /// whose dead fraction passes the threshold and deletes packs with nothing live.
    ///
    /// Safe while other threads put, read and write: a blob a commit references or a put freshens
    /// meanwhile is kept, blobs a live ``Snapshot`` may still read are spared, and the index change
    /// that drops or moves blobs is durable before any pack file is deleted. A crash anywhere inside
    /// leaves a store that opens with nothing referenced lost (Docs/architecture.md).
    ///
    /// The grace period is measured in whole seconds of ``Configuration/now``: a blob is removed
    /// once it has been unreferenced for at least the grace period (and at most a second more).
    /// A grace period of zero removes every unreferenced blob no snapshot can see.
    ///
    /// - Throws: `invalidArgument` for a negative grace period or a rewrite threshold outside
    ///   (0, 1]; `closed` if the store is closed meanwhile; I/O errors. A pack whose entries are
    ///   damaged is left in place (and counted in ``GarbageCollectionReport/packsSkipped``).
    public func collectGarbage(_ options: GarbageCollectionOptions = .init()) throws -> GarbageCollectionReport {
        try collectGarbage(options, progress: nil)
    }

    /// ``collectGarbage(_:)``, calling `progress` on the calling thread as the work advances.
    public func collectGarbage(
        _ options: GarbageCollectionOptions, progress: ((MaintenanceProgress) -> Void)?
    ) throws -> GarbageCollectionReport {
        try engine.collectGarbage(options, progress: progress)
    }

    /// Writes a checkpoint of the current state and deletes the WAL segments and checkpoints it
    /// makes unnecessary, so the next open replays less. Runs automatically in the background once
    /// the WAL passes ``Configuration/checkpointThreshold``. Writers are paused only while the WAL
    /// is cut to a new segment, not while the checkpoint is written.
    public func checkpoint() throws {
        try engine.checkpoint()
    }

    /// Checks the store: WAL and checkpoint checksums, every pack's header, that every indexed
    /// blob's pack file exists and its entry parses and matches the index, and that every reference
    /// count equals the references counted from the records. With `readData`, also reads every blob
    /// back and re-hashes it (without it, damage inside a blob's compressed bytes goes unnoticed).
    ///
    /// Findings are reported, not thrown; errors are thrown only when the check itself cannot run.
    /// Collections and checkpoints wait while it runs; readers and writers do not.
    public func verify(_ options: VerificationOptions = .init()) throws -> VerificationReport {
        try verify(options, progress: nil)
    }

    /// ``verify(_:)``, calling `progress` on the calling thread as the work advances.
    public func verify(_ options: VerificationOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> VerificationReport {
        try engine.verify(options, progress: progress)
    }

    /// Counts and sizes of what the store holds. Reads no file.
    public func statistics() throws -> Statistics {
        try engine.statistics()
    }
}
