#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// The append side of the write-ahead log, with group commit.
///
/// Records are framed into an in-memory buffer under a short lock and receive a log sequence number
/// (LSN, a byte position in this process's log stream). ``flush(upTo:synchronously:)`` makes one
/// caller the leader: it takes everything buffered, makes durable the pack appends those records may
/// refer to, writes the batch and syncs it once for every waiting committer, then wakes them all with
/// one notification. Callers that arrive meanwhile sleep, once, without taking the lock, and are
/// covered by this batch or lead the next. The pack appends become durable by riding in
/// the batch when they are few bytes (a small commit then costs one sync, not two), else by syncing
/// the packs before the batch is written (``BlobStorage/prepareCommit(loggingUpTo:)``).
///
/// After a failed write or sync the log is failed for good: what reached the disk is unknown, so a
/// later sync must never be taken as covering it ("fsyncgate"). Every later call throws until the
/// store is reopened, which recovers from what the disk really holds.
final class WriteAheadLog: Sendable {
    let directory: String
    private let fileSystem: FileSystem
    private let segmentSizeLimit: UInt64
    private let preallocation: UInt64
    private let packs: any BlobStorage
    private let packBytesLimit: Int
    /// Called after each group commit's fsync (the store counts them; the log knows no metrics).
    private let synced: @Sendable () -> Void

    struct Segment {
        var number: UInt64
        var file: File
        var salt: UInt32
        /// Where the next batch goes.
        var size: UInt64
        var durableSize: UInt64
        /// The file's size: the bytes from `size` to here are zeros, written ahead of the batches so
        /// that a batch overwrites them instead of growing the file, and its sync has no file size to
        /// commit through the file system's journal (about 40% of an append's sync on ext4).
        var allocatedSize: UInt64
    }

    private struct State {
        var pending: [UInt8] = []
        /// Commit records in `pending`.
        var pendingCommits = 0
        var appendedLSN: UInt64 = 0
        var writtenLSN: UInt64 = 0
        var durableLSN: UInt64 = 0
        /// How many commits the last synchronous batch made durable: how many committers are likely to
        /// commit again, and worth the next leader's wait (``gatherDelay``).
        var lastBatchCommits = 1
        /// Set while a leader waits for commits to join its batch.
        var gathering = false
        var failure: StoreError?
        var segment: Segment
        /// Sizes of the segments before the current one that are still on disk.
        var completedSegments: [UInt64: UInt64]
    }

    private let state: Mutex<State>
    /// Mirrors `State.durableLSN` and `State.writtenLSN`, so a committer whose record a batch already
    /// covered returns without touching the lock every committer contends for.
    private let durableMirror = Atomic<UInt64>(0)
    private let writtenMirror = Atomic<UInt64>(0)
    /// Bytes appended since the last checkpoint, approximately: what triggers the next one.
    let bytesSinceCheckpoint = Atomic<UInt64>(0)
    /// Whether a caller leads (takes, writes and syncs a batch, or rotates). Taken without the state
    /// lock, so that a committer waiting for a batch never contends for the lock appends take.
    private let leading = Atomic<Bool>(false)
    /// Mirrors `State.failure != nil`.
    private let failed = Atomic<Bool>(false)
    /// Notified when a leader stops: its waiters are covered, or the log failed, or one of them is to
    /// lead next.
    private let leaderStopped = EventCount()
    /// Notified when the batch a leader gathers holds as many commits as the last one did.
    private let batchGathered = EventCount()

    /// Longest a leader waits for committers to join its batch. When the last batch made several
    /// committers durable, they are about to commit again, but on a busy or small machine they have not
    /// been scheduled yet when the next leader starts: without the wait it would sync one or two commits
    /// at a time, each sync costing what a sync of all of them costs. The wait ends as soon as as many
    /// commits are buffered as the last batch held (MySQL's binlog_group_commit_sync_delay with
    /// ..._no_delay_count, with the count learnt from the last batch); it never happens while one
    /// writer commits alone. In nanoseconds.
    static let gatherDelay: Int64 = 200_000

    /// Continues `segment` (whose first `segment.size` bytes are intact and durable).
    /// A synchronous batch carries up to `packBytesLimit` bytes of pack appends instead of syncing packs.
    /// The zeros a young segment is extended by at least (see ``write(_:)``).
    static let smallestPreallocation: UInt64 = 64 << 10

    /// A batch that would grow the segment extends it by `preallocation` bytes of zeros beyond itself.
    init(directory: String, fileSystem: FileSystem, segment: Segment, olderSegments: [UInt64: UInt64], segmentSizeLimit: UInt64,
         preallocation: UInt64, packs: any BlobStorage, packBytesLimit: Int, synced: @escaping @Sendable () -> Void = {}) {
        self.synced = synced
        self.directory = directory
        self.fileSystem = fileSystem
        self.segmentSizeLimit = segmentSizeLimit
        self.preallocation = preallocation
        self.packs = packs
        self.packBytesLimit = packBytesLimit
        state = Mutex(State(segment: segment, completedSegments: olderSegments))
        bytesSinceCheckpoint.store(olderSegments.values.reduce(0, +) + segment.size, ordering: .relaxed)
    }

    /// Creates segment `number` (header written and synced, directory synced). Segments created by one
    /// log share its salt, so records buffered before a rotation stay valid after it.
    static func createSegment(number: UInt64, salt: UInt32, in directory: String, fileSystem: FileSystem) throws -> Segment {
        let path = directory + "/" + WALFormat.fileName(number)
        let file = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_TRUNC)
        let header = WALFormat.header(number: number, salt: salt)
        try file.write(header, at: 0)
        try file.synchronizeData()
        try fileSystem.synchronizeDirectory(directory)
        let size = UInt64(header.count)
        return Segment(number: number, file: file, salt: salt, size: size, durableSize: size, allocatedSize: size)
    }

    /// Bytes in all segments since the last checkpoint, including buffered ones.
    var totalBytes: UInt64 {
        state.withLock { $0.completedSegments.values.reduce(0, +) + $0.segment.size + UInt64($0.pending.count) }
    }

    var currentSegmentNumber: UInt64 { state.withLock { $0.segment.number } }

    /// Buffers a record and returns the LSN that must be flushed for it to be on disk.
    func append(_ record: LogRecord) throws -> UInt64 {
        let payload = record.encoded()
        let (lsn, gathered) = try state.withLock { state in
            if let failure = state.failure { throw failure }
            WALFormat.appendFrame(kind: record.kind.rawValue, payload: payload, salt: state.segment.salt, to: &state.pending)
            state.appendedLSN += UInt64(WALFormat.frameHeaderSize + payload.count)
            bytesSinceCheckpoint.add(UInt64(WALFormat.frameHeaderSize + payload.count), ordering: .relaxed)
            guard case .commit = record else { return (state.appendedLSN, false) }
            state.pendingCommits += 1
            let gathered = state.gathering && state.pendingCommits >= state.lastBatchCommits
            if gathered { state.gathering = false }
            return (state.appendedLSN, gathered)
        }
        if gathered { batchGathered.notifyAll() }
        return lsn
    }

    /// The LSN up to which everything is on stable storage.
    var durableLSN: UInt64 { durableMirror.load(ordering: .acquiring) }

    /// The LSN of everything appended so far.
    var appendedLSN: UInt64 { state.withLock { $0.appendedLSN } }

    /// The LSN up to which everything is written (not necessarily synced).
    var writtenLSN: UInt64 { writtenMirror.load(ordering: .acquiring) }

    /// Returns once everything up to `lsn` is written (and, when `synchronously`, on stable storage).
    ///
    /// The first caller to find no leader leads a batch; the others sleep until it stops, then return
    /// if it covered them, or else one of them leads the next batch.
    func flush(upTo lsn: UInt64, synchronously: Bool, takingBatch: BatchTaking) throws {
        while true {
            let covered = synchronously ? durableMirror.load(ordering: .acquiring) : writtenMirror.load(ordering: .acquiring)
            if covered >= lsn { return }
            if failed.load(ordering: .acquiring) { throw currentFailure }
            if startLeading() {
                defer { stopLeading() }
                if synchronously { gather() }
                try leadBatch(synchronously: synchronously, takingBatch: takingBatch)
            } else {
                waitForLeader()
            }
        }
    }

    /// Takes the lead if no one has it.
    private func startLeading() -> Bool {
        leading.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged
    }

    /// Gives up the lead and wakes everyone waiting for it.
    private func stopLeading() {
        leading.store(false, ordering: .sequentiallyConsistent)
        leaderStopped.notifyAll()
    }

    /// Sleeps until the current leader (if any) stops.
    private func waitForLeader() {
        let key = leaderStopped.key
        if leading.load(ordering: .sequentiallyConsistent) { leaderStopped.wait(key) }
    }

    /// Runs `body` as the leader, once the current one stops: no batch is taken or written meanwhile.
    func whileLeading<T>(_ body: () throws -> T) throws -> T {
        while !startLeading() { waitForLeader() }
        defer { stopLeading() }
        return try body()
    }

    private var currentFailure: StoreError {
        state.withLock { $0.failure } ?? StoreError(code: .io, message: "the write-ahead log failed; reopen the store")
    }

    /// Waits, at most ``gatherDelay``, for as many commits as the last batch held.
    private func gather() {
        let key = batchGathered.key
        let gathered = state.withLock { state in
            state.gathering = state.pendingCommits < state.lastBatchCommits
            return !state.gathering
        }
        guard !gathered else { return }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(WriteAheadLog.gatherDelay)
        while batchGathered.key == key {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            batchGathered.wait(key, timeoutNanoseconds: Int64(deadline - now))
        }
        // `gathering` stays set until the batch is taken (``takeBatch(_:packs:)``).
    }

    /// Takes, writes and (when `synchronously`) syncs the next batch. The caller leads.
    private func leadBatch(synchronously: Bool, takingBatch: BatchTaking) throws {
        var batch: Batch?
        try takingBatch {
            let taken = try state.withLock { state in try startBatch(&state, synchronously: synchronously) }
            batch = taken
            return taken.endLSN
        }
        guard let batch else { preconditionFailure("the batch-taking wrapper did not take the batch") }
        try lead(batch, synchronously: synchronously)
    }

    /// Takes the next batch for the leader. On failure the log is failed.
    private func startBatch(_ state: inout State, synchronously: Bool) throws -> Batch {
        if let failure = state.failure { throw failure }
        // Chosen under this lock, so every record the batch takes was logged after the appends it names.
        let packs: PackCommitPlan
        do {
            packs = synchronously ? try self.packs.prepareCommit(loggingUpTo: packBytesLimit) : PackCommitPlan()
        } catch {
            throw fail(&state, error)
        }
        return takeBatch(&state, packs: packs)
    }

    /// Records the failure every later call reports, and returns it.
    private func fail(_ state: inout State, _ error: any Error) -> StoreError {
        let failure = state.failure ?? WriteAheadLog.failure(error)
        state.failure = failure
        failed.store(true, ordering: .releasing)
        return failure
    }

    /// Flushes everything durably and starts a new segment; returns its number. The caller leads
    /// (``whileLeading(_:)``) and holds the lock that orders appends, so no record can land on either
    /// side of the cut by accident.
    func rotate(takingBatch: BatchTaking) throws -> UInt64 {
        precondition(leading.load(ordering: .relaxed), "rotate() needs the lead")
        try leadBatch(synchronously: true, takingBatch: takingBatch)
        return try state.withLock { state in
            if let failure = state.failure { throw failure }
            precondition(state.pending.isEmpty, "rotate() needs appends stopped")
            do {
                try startNextSegment(&state)
            } catch {
                // The next segment may exist half made: appending on to this one would leave commits
                // in a segment that is no longer the last, where a torn tail is taken for damage.
                throw fail(&state, error)
            }
            return state.segment.number
        }
    }

    /// Flushes everything durably and cuts the zeros off the segment, so a store closed cleanly holds
    /// only frames. The caller has stopped appends.
    func close(takingBatch: BatchTaking) throws {
        try whileLeading {
            try leadBatch(synchronously: true, takingBatch: takingBatch)
            try state.withLock { state in
                if let failure = state.failure { throw failure }
                guard state.segment.allocatedSize > state.segment.size else { return }
                do {
                    try state.segment.file.truncate(to: state.segment.size)
                    try state.segment.file.synchronizeData()
                } catch {
                    throw fail(&state, error)
                }
                state.segment.allocatedSize = state.segment.size
            }
        }
    }

    /// Forgets segments a checkpoint made unnecessary (for ``totalBytes``).
    func segmentsRemoved(before number: UInt64) {
        state.withLock { state in
            state.completedSegments = state.completedSegments.filter { $0.key >= number }
            bytesSinceCheckpoint.store(state.completedSegments.values.reduce(0, +) + state.segment.size + UInt64(state.pending.count), ordering: .relaxed)
        }
    }

    private struct Batch {
        var bytes: [UInt8]
        var endLSN: UInt64
        var commits: Int
        var segment: Segment
        var packs: PackCommitPlan
    }

    private func takeBatch(_ state: inout State, packs: PackCommitPlan) -> Batch {
        // A sync point in front of the batch tells recovery how much of the segment was durable. The
        // pack bytes come next, ahead of every record that may refer to them: a torn batch that keeps
        // a record keeps them too.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(state.pending.count + 17 + packs.logged.reduce(0) { $0 + $1.bytes.count + 30 })
        if !state.pending.isEmpty || !packs.logged.isEmpty {
            var claim = ByteWriter(capacity: 8)
            claim.append(state.segment.durableSize)
            WALFormat.appendFrame(kind: WALFormat.syncPointKind, payload: claim.bytes, salt: state.segment.salt, to: &bytes)
        }
        for logged in packs.logged {
            let record = LogRecord.packBytes(logged)
            WALFormat.appendFrame(kind: record.kind.rawValue, payload: record.encoded(), salt: state.segment.salt, to: &bytes)
        }
        bytesSinceCheckpoint.add(UInt64(bytes.count), ordering: .relaxed)
        bytes.append(contentsOf: state.pending)
        state.pending.removeAll(keepingCapacity: true)
        let batch = Batch(bytes: bytes, endLSN: state.appendedLSN, commits: state.pendingCommits, segment: state.segment, packs: packs)
        state.pendingCommits = 0
        state.gathering = false
        state.segment.size += UInt64(bytes.count)
        return batch
    }

    private func lead(_ batch: Batch, synchronously: Bool) throws {
        do {
            if synchronously { try packs.synchronize(batch.packs) }
            let allocatedSize = try write(batch)
            if synchronously {
                try batch.segment.file.synchronizeData()
                synced()
            }
            try state.withLock { state in
                if state.segment.number == batch.segment.number { state.segment.allocatedSize = allocatedSize }
                state.writtenLSN = max(state.writtenLSN, batch.endLSN)
                writtenMirror.store(state.writtenLSN, ordering: .releasing)
                if synchronously {
                    state.durableLSN = max(state.durableLSN, batch.endLSN)
                    durableMirror.store(state.durableLSN, ordering: .releasing)
                    if state.segment.number == batch.segment.number {
                        state.segment.durableSize = batch.segment.size + UInt64(batch.bytes.count)
                    }
                    state.lastBatchCommits = max(1, batch.commits)
                }
                if state.segment.size >= segmentSizeLimit { try startNextSegment(&state) }
            }
        } catch {
            throw state.withLock { state in fail(&state, error) }
        }
    }

    /// Writes the batch; returns the segment's allocated size after it.
    ///
    /// A batch that would grow the segment carries the next `preallocation` bytes of zeros (fewer while
    /// the segment is young; up to the segment size limit) in the same write and sync: once per that many bytes of log, a sync commits
    /// a size change, and the batches in between only overwrite. Recovery reads the zeros as the end of
    /// the log, and truncates them away (Docs/on-disk-format.md).
    private func write(_ batch: Batch) throws -> UInt64 {
        let segment = batch.segment
        let end = segment.size + UInt64(batch.bytes.count)
        guard end > segment.allocatedSize else {
            if !batch.bytes.isEmpty { try segment.file.write(batch.bytes, at: segment.size) }
            return segment.allocatedSize
        }
        // A young segment grows by as much as it already holds (64 KiB at least), up to
        // `preallocation`: a store that commits a few times writes KiB of zeros, not a MiB each time.
        let step = min(preallocation, max(WriteAheadLog.smallestPreallocation, end))
        let allocatedSize = max(end, min(end + step, segmentSizeLimit))
        try segment.file.write(batch.bytes + repeatElement(0, count: Int(allocatedSize - end)), at: segment.size)
        return allocatedSize
    }

    /// The error every call reports once the log has failed.
    private static func failure(_ error: any Error) -> StoreError {
        (error as? StoreError).map {
            StoreError(code: $0.code, message: "the write-ahead log failed; reopen the store: \($0.message)", path: $0.path, cause: $0.cause)
        } ?? StoreError(code: .io, message: "the write-ahead log failed; reopen the store", cause: error)
    }

    /// Cuts the zeros off the full segment and syncs it (so only the last segment can ever hold a torn
    /// tail or zeros), then opens the next. Every pack is synced first, also the bytes batches carried:
    /// a checkpoint rotates, and then lets the segments that carried them go.
    private func startNextSegment(_ state: inout State) throws {
        try packs.synchronize()
        if state.segment.allocatedSize > state.segment.size { try state.segment.file.truncate(to: state.segment.size) }
        try state.segment.file.synchronizeData()
        let next = try WriteAheadLog.createSegment(number: state.segment.number + 1, salt: state.segment.salt, in: directory, fileSystem: fileSystem)
        state.completedSegments[state.segment.number] = state.segment.size
        state.segment = next
    }
}
