import Synchronization

/// Where blob entries live. ``PackStore`` keeps them in local pack files; a later backend may keep
/// packs in an object store. The store needs only these operations.
protocol BlobStorage: AnyObject, Sendable {
    /// Every pack, ascending.
    var packIDs: [UInt32] { get }
    /// The pack appends go to now; collection leaves it alone.
    var activePackID: UInt32? { get }
    /// Bytes of all packs.
    var totalBytes: UInt64 { get }
    func size(of pack: UInt32) -> UInt64?
    /// A name for messages (a path for local packs).
    func path(of pack: UInt32) -> String
    /// Appends entries in order and returns where each landed; durable after ``synchronize()``. An
    /// entry that uses a dictionary gets the dictionary written before it when its pack lacks it. The
    /// caller settles each (``settle(_:)``) once the index knows where it is; when this throws, none
    /// needs settling.
    func append(_ entries: [PackEntry]) throws -> [BlobLocation]
    /// Marks one append to `pack` as known to the index (or found redundant).
    func settle(_ pack: UInt32)
    /// Whether `pack` received appends the index may not know yet; collection leaves such a pack alone.
    func hasUnsettledAppends(_ pack: UInt32) -> Bool
    /// Random access to a pack's bytes; nil when the pack does not exist.
    func file(_ pack: UInt32) -> File?
    /// How the appends so far become durable with the WAL batch being taken: carried by it when they
    /// come to at most `limit` bytes, else synced first.
    func prepareCommit(loggingUpTo limit: Int) throws -> PackCommitPlan
    /// Performs the syncs `plan` calls for.
    func synchronize(_ plan: PackCommitPlan) throws
    /// Makes every append so far durable by syncing it (also the ones a WAL batch carries).
    func synchronize() throws
    /// Deletes a pack whose live entries are gone or moved (durable once the caller syncs the directory).
    func remove(_ pack: UInt32) throws
    func close()
}

extension BlobStorage {
    /// Appends one entry (see ``append(_:)``).
    func append(header: [UInt8], payload: UnsafeRawBufferPointer, indexEntry: PackFormat.IndexEntry) throws -> BlobLocation {
        try append([PackEntry(header: header, payload: .borrowed(payload), indexEntry: indexEntry)])[0]
    }

    /// Appends one entry holding `frame`, compressed with `dictionary` (see ``PackEntry/DictionaryUse``).
    func append(digest: Digest, rawLength: UInt32, frame: UnsafeRawBufferPointer, dictionary: ChunkDictionary, time: UInt32) throws -> BlobLocation {
        try append([PackEntry(digest: digest, rawLength: rawLength, frame: .borrowed(frame), dictionary: dictionary, time: time)])[0]
    }
}

/// What makes the packs' appends durable along with a WAL batch (``BlobStorage/prepareCommit(loggingUpTo:)``).
struct PackCommitPlan {
    /// The bytes appended since they were last synced or logged, for the batch to carry.
    var logged: [LogRecord.PackBytes] = []
    /// Packs to sync before the batch is written.
    var files: [File] = []
    /// Whether the pack directory needs a sync before the batch (a pack was created).
    var directory = false
}

/// The record log: ordered, checksummed, durable on flush. ``WriteAheadLog`` keeps it in local
/// segment files; a later backend may keep it in a database.
protocol RecordLog: AnyObject, Sendable {
    /// Buffers a record; returns the position to flush up to for it to be on disk.
    func append(_ record: LogRecord) throws -> UInt64
    /// The position after everything appended so far.
    var appendedLSN: UInt64 { get }
    /// The position up to which everything is on stable storage.
    var durableLSN: UInt64 { get }
    /// The position up to which everything is written (not necessarily on stable storage).
    var writtenLSN: UInt64 { get }
    /// Returns once everything up to `lsn` is written (and, when `synchronously`, durable). Every
    /// batch it takes, it takes inside `takingBatch` (see ``BatchTaking``).
    func flush(upTo lsn: UInt64, synchronously: Bool, takingBatch: BatchTaking) throws
    /// Runs `body` while no batch is being written, and none is taken but by `body`. Take it before the
    /// lock that orders appends: a leader may be waiting for that lock to take its batch.
    func whileLeading<T>(_ body: () throws -> T) throws -> T
    /// Flushes durably and starts a new segment, returning its number: what a checkpoint covers ends here.
    /// The caller is inside ``whileLeading(_:)`` and has stopped appends.
    func rotate(takingBatch: BatchTaking) throws -> UInt64
    /// The segment being appended to.
    var currentSegmentNumber: UInt64 { get }
    /// Bytes not yet covered by a checkpoint.
    var totalBytes: UInt64 { get }
    /// ``totalBytes``, approximately and without a lock: what triggers automatic checkpoints.
    var bytesSinceCheckpoint: Atomic<UInt64> { get }
    /// Forgets segments a checkpoint made unnecessary.
    func segmentsRemoved(before number: UInt64)
    /// Flushes durably and leaves the log as a closed store keeps it.
    func close(takingBatch: BatchTaking) throws
}

/// How a log's caller wraps the taking of each batch: it calls `take` (which takes the next batch
/// of records to write and returns the LSN the batch ends at) with appends held off, and so knows
/// its state as of that LSN. The store notes its records there, for publishing once the batch is
/// durable (``Published``).
typealias BatchTaking = (_ take: () throws -> UInt64) throws -> Void

extension PackStore: BlobStorage {}
extension WriteAheadLog: RecordLog {}
