#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization

/// The embedded engine: one store in one directory, opened by one process (Docs/architecture.md).
///
/// Its components, each in a file of its own, own one invariant each and say which at their top:
/// ``Core`` (the state and the order of changes), ``CommitPipeline`` (transactions, group commit,
/// durability before a batch, publication), ``WriteAheadLog`` (segments and frames), ``PackStore``
/// (pack files), recovery (LocalEngine+Recovery), the blob writer and reader (Blobs/), the collector
/// (GC/) and the checkpointer (Checkpoint/). ``Store`` drives it through ``StoreEngine``.
final class LocalEngine: StoreEngine {
    typealias Configuration = Store.Configuration
    typealias Limits = Store.Limits

    let configuration: Configuration
    let directory: URL
    /// What tests substituted (``Store/Seams``); the defaults otherwise.
    let seams: Store.Seams

    let layout: Layout
    let fileSystem: FileSystem
    let packs: PackStore
    let wal: WriteAheadLog
    /// Transactions, group commit and publication.
    let commits: CommitPipeline
    let snapshots = SnapshotRegistry()
    /// Blobs `get` returned recently (``Configuration/readCacheSize``).
    let cache: BlobCache
    /// The dictionary chunks are compressed with, and dictionaries read back from packs.
    let dictionaries = ChunkDictionaries()
    /// The dictionary small whole blobs are compressed with, once trained.
    let smallBlobs = SmallBlobDictionary()
    private let lockFile: Mutex<File?>

    /// Records, blob index and the order of WAL appends.
    let core: Core
    /// Mirrors `Core.Held.isOpen` for ``checkOpen()``, which every call makes.
    private let isOpen = Atomic<Bool>(true)
    /// Serializes checkpoints and collections with each other.
    let maintenance = Mutex<Void>(())
    let background: BackgroundWork
    /// Counters, timer and gauges (Observability/StoreMetrics.swift).
    let metrics: StoreMetrics
    /// The latest time ``nowSeconds`` returned, so it never goes backward (see there).
    private let clockFloor = ClockFloor()

    var logger: Logger { configuration.logger }

    /// Opens (creating it when the directory is missing or empty) and recovers the store in
    /// `directory` (``Store/init(at:configuration:)``).
    init(at directory: URL, configuration: Configuration, seams: Store.Seams) throws {
        self.configuration = configuration
        self.seams = seams
        self.directory = directory.standardizedFileURL
        layout = Layout(root: self.directory.path)
        cache = BlobCache(capacity: configuration.readCacheSize, secondUseMinimumSize: BlobCache.largeBlobMinimumSize)
        fileSystem = FileSystem(io: seams.fileIO)
        let metrics = StoreMetrics(factory: configuration.metricsFactory)
        self.metrics = metrics
        try LocalEngine.validate(configuration)

        let (lock, recovered) = try LocalEngine.openDirectory(layout, fileSystem: fileSystem, configuration: configuration)
        lockFile = Mutex(lock)
        do {
            packs = try PackStore(
                directory: layout.packs, sizeTarget: configuration.packSizeTarget, fileSystem: fileSystem, firstNewID: recovered.firstNewPackID)
            wal = WriteAheadLog(
                directory: layout.wal, fileSystem: fileSystem, segment: recovered.segment, olderSegments: recovered.olderSegments,
                segmentSizeLimit: configuration.walSegmentSize, preallocation: seams.walPreallocation)
            core = Core(recovered.state)
            let clockFloor = clockFloor
            commits = CommitPipeline(
                core: core, log: wal, packs: packs, records: recovered.state.records, limits: configuration.limits,
                durability: configuration.durability, packBytesLimit: min(seams.loggedPackBytesLimit, WALFormat.maximumPackBytes),
                metrics: metrics, logger: configuration.logger,
                clock: { [now = configuration.now] in LocalEngine.seconds(now(), floor: clockFloor) })
            background = BackgroundWork()
        }
        adoptSavedSmallBlobDictionary()
        if let interval = configuration.maintenanceInterval { startPeriodicMaintenance(every: interval) }
        refreshGauges()
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
    /// Idempotent; every later call throws `closed`.
    func close() throws {
        // Background work finishes first, so a checkpoint in progress completes rather than fails.
        background.stopAndWait()
        checkpointBeforeClosing()
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
        try commits.close()
        try packs.synchronize()
    }

    /// A close leaves at most this fraction of ``Configuration/checkpointThreshold`` for the next open
    /// to replay.
    static let closingCheckpointFraction: UInt64 = 16

    /// Writes a checkpoint when the log since the last one is more than a sixteenth of the threshold
    /// that starts one in the background: the next open then loads the checkpoint and replays little
    /// (a million blobs and records: a quarter of a second from a checkpoint, several times that
    /// from the log), as SQLite checkpoints when its last connection closes and RocksDB flushes its
    /// memtables. A failure is logged and the close goes on: the log still holds everything.
    private func checkpointBeforeClosing() {
        guard isOpen.load(ordering: .acquiring),
              wal.bytesSinceCheckpoint.load(ordering: .relaxed) >= configuration.checkpointThreshold / Self.closingCheckpointFraction
        else { return }
        do {
            try maintenance.withLock { _ in try writeCheckpoint() }
        } catch {
            logger.error("checkpoint at close failed; the next open replays the log", metadata: ["error": "\(error)", "path": "\(layout.root)"])
        }
    }

    /// A fast, lock-free check at the start of public calls; operations that change state check
    /// `Core.isOpen` again under the core lock.
    func checkOpen() throws {
        guard isOpen.load(ordering: .acquiring) else { throw Store.closedError }
    }

    /// Seconds since the Unix epoch on the configured clock, never earlier than a value returned
    /// before: grace periods and snapshot pins compare these times, and a wall clock stepped back
    /// (NTP) must not make a later unreference look older than a snapshot taken before it.
    var nowSeconds: UInt32 { LocalEngine.seconds(configuration.now(), floor: clockFloor) }

    /// `date` in whole seconds since the Unix epoch, raised to `floor` (which it then raises).
    static func seconds(_ date: Date, floor: ClockFloor) -> UInt32 {
        let reading = UInt32(clamping: Int64(date.timeIntervalSince1970.rounded(.down)))
        return floor.seconds.max(reading, ordering: .relaxed).newValue
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

/// The latest time a store's clock returned, so it never goes backward (``LocalEngine/nowSeconds``).
final class ClockFloor: Sendable {
    let seconds = Atomic<UInt32>(0)
}

extension LocalEngine {
    /// Paths inside the store directory.
    struct Layout: Sendable {
        let root: String
        var format: String { root + "/FORMAT" }
        var lock: String { root + "/LOCK" }
        var wal: String { root + "/wal" }
        var packs: String { root + "/packs" }
        var checkpoints: String { root + "/checkpoint" }
        /// The small-blob dictionary an open trained, for the next opens (LocalEngine+SmallBlobDictionary).
        var smallBlobDictionary: String { root + "/small-blobs.dict" }
    }
}
