#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// The append side of the write-ahead log: segments and the frames in them, and nothing else.
///
/// Owns: the segment files hold whole frames in LSN order, each batch preceded by a sync point that
/// tells recovery how much of the segment was durable; `durableLSN` never claims a byte the disk may
/// not have. Records are framed into an in-memory buffer under a short lock and receive a log
/// sequence number (LSN, a byte position in this process's log stream); the commit pipeline
/// (``CommitPipeline``) takes the buffer as a batch, has it written and synced, and decides what
/// else must be durable first. The log knows no packs, records or locks above it.
///
/// After a failed write or sync the log is failed for good: what reached the disk is unknown, so a
/// later sync must never be taken as covering it ("fsyncgate"). Every later call throws until the
/// store is reopened, which recovers from what the disk really holds.
///
/// Lock order: the log's lock is a leaf: nothing is called with it held but file I/O.
final class WriteAheadLog: Sendable {
    let directory: String
    private let fileSystem: FileSystem
    private let segmentSizeLimit: UInt64
    private let preallocation: UInt64

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
        /// How many commits the last synchronous batch made durable.
        var lastBatchCommits = 1
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
    /// Mirrors `State.pendingCommits`, for the pipeline's gathering leader (``CommitPipeline``).
    private let bufferedCommitsMirror = Atomic<Int>(0)
    /// Bytes appended since the last checkpoint, approximately: what triggers the next one.
    let bytesSinceCheckpoint = Atomic<UInt64>(0)
    /// Mirrors `State.failure != nil`.
    private let failed = Atomic<Bool>(false)

    /// The zeros a young segment is extended by at least (see ``write(_:)``).
    static let smallestPreallocation: UInt64 = 64 << 10
    /// Bytes in front of a batch's records: its sync point's frame.
    static let syncPointFrameSize = WALFormat.frameHeaderSize + 8

    /// Continues `segment` (whose first `segment.size` bytes are intact and durable). A batch that
    /// would grow the segment extends it by `preallocation` bytes of zeros beyond itself.
    init(directory: String, fileSystem: FileSystem, segment: Segment, olderSegments: [UInt64: UInt64], segmentSizeLimit: UInt64,
         preallocation: UInt64) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.segmentSizeLimit = segmentSizeLimit
        self.preallocation = preallocation
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

    /// Buffers a record and returns the LSN that must be written (and synced) for it to be on disk.
    /// REQUIRES: the core lock held, which orders appends with the batches taken (``takeBatch(carrying:)``).
    func append(_ record: LogRecord) throws -> UInt64 {
        let payload = record.encoded()
        return try state.withLock { state in
            if let failure = state.failure { throw failure }
            WALFormat.appendFrame(kind: record.kind.rawValue, payload: payload, salt: state.segment.salt, to: &state.pending)
            state.appendedLSN += UInt64(WALFormat.frameHeaderSize + payload.count)
            bytesSinceCheckpoint.add(UInt64(WALFormat.frameHeaderSize + payload.count), ordering: .relaxed)
            if case .commit = record {
                state.pendingCommits += 1
                bufferedCommitsMirror.store(state.pendingCommits, ordering: .sequentiallyConsistent)
            }
            return state.appendedLSN
        }
    }

    /// Commit records buffered and not yet taken in a batch.
    var bufferedCommits: Int { bufferedCommitsMirror.load(ordering: .sequentiallyConsistent) }

    /// How many commits the last synchronous batch made durable (at least 1).
    var lastBatchCommits: Int { state.withLock { $0.lastBatchCommits } }

    /// The LSN up to which everything is on stable storage.
    var durableLSN: UInt64 { durableMirror.load(ordering: .acquiring) }

    /// The LSN of everything appended so far.
    var appendedLSN: UInt64 { state.withLock { $0.appendedLSN } }

    /// The LSN up to which everything is written (not necessarily synced).
    var writtenLSN: UInt64 { writtenMirror.load(ordering: .acquiring) }

    /// Whether the log has failed (see the type's comment).
    var hasFailed: Bool { failed.load(ordering: .acquiring) }

    /// The error every call reports once the log has failed.
    var currentFailure: StoreError {
        state.withLock { $0.failure } ?? StoreError(code: .io, message: "the write-ahead log failed; reopen the store")
    }

    /// Throws the log's failure, if it has failed.
    func checkHealthy() throws {
        try state.withLock { state in if let failure = state.failure { throw failure } }
    }

    /// Fails the log with `error` (a write or sync it depends on failed), and returns the failure every
    /// later call reports.
    func fail(_ error: any Error) -> StoreError {
        state.withLock { state in fail(&state, error) }
    }

    /// Records the failure every later call reports, and returns it.
    private func fail(_ state: inout State, _ error: any Error) -> StoreError {
        let failure = state.failure ?? WriteAheadLog.failure(error)
        state.failure = failure
        failed.store(true, ordering: .releasing)
        return failure
    }

    /// Whether the current segment has reached the size limit: the caller makes what earlier segments
    /// carried durable, then ``startNextSegment()``.
    var isSegmentFull: Bool { state.withLock { $0.segment.size >= segmentSizeLimit } }

    /// Cuts the zeros off the current segment and syncs it (so only the last segment can ever hold a
    /// torn tail or zeros), then opens the next; returns its number. REQUIRES: the pipeline's lead,
    /// so no batch is written meanwhile. On failure the log is failed: the next segment may exist half
    /// made, and appending on to this one would leave commits in a segment that is no longer the last,
    /// where a torn tail is taken for damage.
    func startNextSegment() throws -> UInt64 {
        try state.withLock { state in
            if let failure = state.failure { throw failure }
            do {
                if state.segment.allocatedSize > state.segment.size { try state.segment.file.truncate(to: state.segment.size) }
                try state.segment.file.synchronizeData()
                let next = try WriteAheadLog.createSegment(number: state.segment.number + 1, salt: state.segment.salt, in: directory, fileSystem: fileSystem)
                state.completedSegments[state.segment.number] = state.segment.size
                state.segment = next
            } catch {
                throw fail(&state, error)
            }
            return state.segment.number
        }
    }

    /// Cuts the zeros off the segment, so a store closed cleanly holds only frames. REQUIRES: the
    /// pipeline's lead, every batch written and synced, appends stopped.
    func trimForClose() throws {
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

    /// Forgets segments a checkpoint made unnecessary (for ``totalBytes``).
    func segmentsRemoved(before number: UInt64) {
        state.withLock { state in
            state.completedSegments = state.completedSegments.filter { $0.key >= number }
            bytesSinceCheckpoint.store(state.completedSegments.values.reduce(0, +) + state.segment.size + UInt64(state.pending.count), ordering: .relaxed)
        }
    }

    /// Frames taken from the buffer, to be written at the end of a segment.
    struct Batch {
        fileprivate var bytes: [UInt8]
        /// The LSN after the batch's last record.
        var endLSN: UInt64
        fileprivate var commits: Int
        fileprivate var segment: Segment
    }

    /// Takes everything buffered as the next batch, behind a sync point and the `carried` pack bytes,
    /// which come ahead of every record that may refer to them: a torn batch that keeps a record keeps
    /// them too. REQUIRES: the pipeline's lead and the core lock held (no record is appended meanwhile,
    /// so every record taken was appended after the pack bytes `carried` names).
    func takeBatch(carrying carried: [LogRecord.PackBytes]) throws -> Batch {
        try state.withLock { state in
            if let failure = state.failure { throw failure }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(state.pending.count + Self.syncPointFrameSize
                                  + carried.reduce(0) { $0 + $1.bytes.count + LogRecord.PackBytes.overhead })
            if !state.pending.isEmpty || !carried.isEmpty {
                var claim = ByteWriter(capacity: 8)
                claim.append(state.segment.durableSize)
                WALFormat.appendFrame(kind: WALFormat.syncPointKind, payload: claim.bytes, salt: state.segment.salt, to: &bytes)
            }
            for logged in carried {
                let record = LogRecord.packBytes(logged)
                WALFormat.appendFrame(kind: record.kind.rawValue, payload: record.encoded(), salt: state.segment.salt, to: &bytes)
            }
            bytesSinceCheckpoint.add(UInt64(bytes.count), ordering: .relaxed)
            bytes.append(contentsOf: state.pending)
            state.pending.removeAll(keepingCapacity: true)
            let batch = Batch(bytes: bytes, endLSN: state.appendedLSN, commits: state.pendingCommits, segment: state.segment)
            state.pendingCommits = 0
            bufferedCommitsMirror.store(0, ordering: .sequentiallyConsistent)
            state.segment.size += UInt64(bytes.count)
            return batch
        }
    }

    /// Writes a batch (and, when `synchronously`, syncs it), then advances the written and durable
    /// LSNs. REQUIRES: the pipeline's lead. On failure the log is failed.
    func write(_ batch: Batch, synchronously: Bool) throws {
        do {
            let allocatedSize = try write(batch)
            if synchronously { try batch.segment.file.synchronizeData() }
            state.withLock { state in
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
            }
        } catch {
            throw fail(error)
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
}
