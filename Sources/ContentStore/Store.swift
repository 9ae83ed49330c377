#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization

/// A content-addressed blob store with transactional records, exact reference counts and
/// garbage collection. See Docs/architecture.md.
///
/// `Store` is `Sendable`: any number of threads may put, get, read and write at once. Hashing and
/// compression run outside every lock; concurrent commits share one `fsync` (group commit). One
/// process at a time opens a store (an OS file lock on `LOCK`).
public final class Store: Sendable {
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// The store's directory.
    public let directory: URL

    let layout: Layout
    let fileSystem: FileSystem
    let packs: any BlobStorage
    let wal: any RecordLog
    let snapshots = SnapshotRegistry()
    /// Blobs `get` returned recently (``Configuration/readCacheSize``).
    let cache: BlobCache
    /// The dictionary chunks are compressed with, and dictionaries read back from packs.
    let dictionaries = ChunkDictionaries()
    private let lockFile: Mutex<File?>

    struct Core {
        var state: StoreState
        var isOpen = true
    }

    /// Records, blob index and the order of WAL appends: held briefly, never across I/O except the
    /// rotation of a checkpoint.
    let core: Mutex<Core>
    /// Mirrors `Core.isOpen` for ``checkOpen()``, which every call makes.
    private let isOpen = Atomic<Bool>(true)
    /// Serializes transactions, so each sees the one before it.
    let writer = AdaptiveLock()
    /// What readers see: the records as of the newest commit that is durable.
    let published: Mutex<Published>
    /// Mirrors `Published.lsn`, so a committer whose commit another published skips the lock.
    let publishedLSN = Atomic<UInt64>(0)
    /// Serializes checkpoints and collections with each other.
    let maintenance = Mutex<Void>(())
    let background: BackgroundWork
    /// The threads the async API runs blocking work on (Async/IOThreadPool.swift).
    let ioThreads = IOThreadPool()
    /// Counters, timer and gauges (Observability/StoreMetrics.swift).
    let metrics: StoreMetrics
    /// The control socket's server while the store is open (Control/ControlServer.swift).
    let control = Mutex<ControlServer?>(nil)
    /// The latest time ``nowSeconds`` returned, so it never goes backward (see there).
    private let clockFloor = Atomic<UInt32>(0)

    var logger: Logger { configuration.logger }

    /// Opens the store in `directory`, creating it when the directory is missing or empty, and
    /// recovers: loads the newest checkpoint and replays the WAL written after it. A torn write at the
    /// end of the log is cut off; damage anywhere else is `corrupted`, naming the file and offset.
    ///
    /// - Throws: ``StoreError`` with `locked` (naming the process) when another process has the store
    ///   open, `unsupportedFormat` for a directory that is not a store or a newer format version.
    public init(at directory: URL, configuration: Configuration = .init()) throws {
        self.configuration = configuration
        self.directory = directory.standardizedFileURL
        layout = Layout(root: self.directory.path)
        cache = BlobCache(capacity: configuration.readCacheSize)
        fileSystem = FileSystem(io: configuration.fileIO)
        let metrics = StoreMetrics(factory: configuration.metricsFactory)
        self.metrics = metrics
        try Store.validate(configuration)

        let (lock, recovered) = try Store.openDirectory(layout, fileSystem: fileSystem, configuration: configuration)
        lockFile = Mutex(lock)
        do {
            packs = try PackStore(
                directory: layout.packs, sizeTarget: configuration.packSizeTarget, fileSystem: fileSystem, firstNewID: recovered.firstNewPackID)
            wal = WriteAheadLog(
                directory: layout.wal, fileSystem: fileSystem, segment: recovered.segment, olderSegments: recovered.olderSegments,
                segmentSizeLimit: configuration.walSegmentSize, preallocation: configuration.walPreallocation, packs: packs, packBytesLimit: min(configuration.loggedPackBytesLimit, WALFormat.maximumPackBytes),
                synced: metrics.walSynced)
            core = Mutex(Core(state: recovered.state))
            published = Mutex(Published(records: recovered.state.records))
            background = BackgroundWork()
        }
        if let interval = configuration.maintenanceInterval { startPeriodicMaintenance(every: interval) }
        refreshGauges()
        if configuration.controlSocket { control.withLock { $0 = ControlServer.start(for: self) } }
        configuration.logger.debug("opened store", metadata: [
            "path": "\(layout.root)", "blobs": "\(recovered.state.blobs.count)",
            "records": "\(recovered.state.records.count)", "replayed": "\(recovered.replayedRecords)",
            "packsRestored": "\(recovered.packsRestored)",
        ])
    }

    deinit {
        try? close()
    }

    /// Makes everything written durable, waits for background maintenance, and releases the store.
    /// Idempotent; every later call on this instance throws `closed`.
    public func close() throws {
        control.withLock { $0.take() }?.stop()
        // Background work finishes first, so a checkpoint in progress completes rather than fails.
        background.stopAndWait()
        let wasOpen = core.withLock { core in
            defer {
                core.isOpen = false
                isOpen.store(false, ordering: .releasing)
            }
            return core.isOpen
        }
        guard wasOpen else { return }
        // A collection, checkpoint or verify running on another thread sees `isOpen == false` at its
        // next step and stops; wait for it, so nothing touches the files after the lock is released.
        maintenance.withLock { _ in }
        defer {
            packs.close()
            lockFile.withLock { $0 = nil }
        }
        try wal.close { take in try core.withLock { core in try takeBatch(take, core: &core) } }
        try packs.synchronize()
    }

    /// A fast, lock-free check at the start of public calls; operations that change state check
    /// `Core.isOpen` again under the core lock.
    func checkOpen() throws {
        guard isOpen.load(ordering: .acquiring) else { throw Store.closedError }
    }

    static let closedError = StoreError(code: .closed, message: "the store is closed")

    /// Seconds since the Unix epoch on the configured clock, never earlier than a value returned
    /// before: grace periods and snapshot pins compare these times, and a wall clock stepped back
    /// (NTP) must not make a later unreference look older than a snapshot taken before it.
    var nowSeconds: UInt32 {
        let reading = UInt32(clamping: Int64(configuration.now().timeIntervalSince1970.rounded(.down)))
        return clockFloor.max(reading, ordering: .relaxed).newValue
    }

    private static func validate(_ configuration: Configuration) throws {
        guard (1 ... 22).contains(configuration.compressionLevel) else {
            throw StoreError.invalidArgument("compression level \(configuration.compressionLevel) is outside 1...22")
        }
        guard configuration.readCacheSize >= 0 else { throw StoreError.invalidArgument("the read cache size is negative") }
        guard configuration.garbageGracePeriod >= .zero else { throw StoreError.invalidArgument("the grace period is negative") }
        guard configuration.packSizeTarget >= 1 << 16, configuration.walSegmentSize >= 1 << 16 else {
            throw StoreError.invalidArgument("pack and WAL segment sizes must be at least 64 KiB")
        }
        do {
            try configuration.chunking.validate()
        } catch {
            throw StoreError.invalidArgument("\(error)")
        }
        guard configuration.chunkingThreshold > configuration.chunking.maximumSize else {
            throw StoreError.invalidArgument("the chunking threshold \(configuration.chunkingThreshold) does not exceed the maximum chunk size \(configuration.chunking.maximumSize)")
        }
        if let interval = configuration.maintenanceInterval, interval <= .zero {
            throw StoreError.invalidArgument("the maintenance interval must be positive")
        }
    }
}

extension Store {
    /// Paths inside the store directory.
    struct Layout: Sendable {
        let root: String
        var format: String { root + "/FORMAT" }
        var lock: String { root + "/LOCK" }
        var wal: String { root + "/wal" }
        var packs: String { root + "/packs" }
        var checkpoints: String { root + "/checkpoint" }
    }
}
