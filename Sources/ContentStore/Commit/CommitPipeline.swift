import Dispatch
import Logging
import Synchronization

/// The commit pipeline: transactions, group commit, publication, and what must be durable before a
/// batch of the log is.
///
/// Owns:
/// - transactions run one at a time (the writer lock), each seeing the one before it;
/// - a commit is acknowledged only once it is durable (``Store/Durability/full``) or written
///   (``Store/Durability/none``), and readers see it only then (``Published``);
/// - rule 2's first half: every pack byte a record in a batch may refer to is durable no later than
///   the batch: carried in the batch when they are few (one sync per small commit instead of two),
///   else synced before it is written (``PackStore/prepareCommit(loggingUpTo:)``); and every pack is
///   synced before the log leaves a segment that carried bytes;
/// - group commit: one leader takes, writes and syncs a batch for every committer waiting, who
///   sleep, once, and are covered by that batch or lead the next.
///
/// The log below knows only segments and frames; the packs know only their files. Data goes down to
/// them and results come back: nothing below calls up.
///
/// Lock order: the writer lock → the lead → the core lock → the published records' lock, the log's
/// lock, the packs' lock.
final class CommitPipeline: Sendable {
    let core: Core
    let log: WriteAheadLog
    let packs: PackStore
    private let limits: Store.Limits
    private let durability: Store.Durability
    /// The most pack bytes a batch carries instead of syncing the packs first.
    private let packBytesLimit: Int
    private let clock: @Sendable () -> UInt32
    /// Counts the syncs of the log.
    private let metrics: StoreMetrics
    private let logger: Logger

    /// Serializes transactions, so each sees the one before it.
    private let writer = AdaptiveLock()
    /// What readers see: the records as of the newest commit that is durable.
    let published: Mutex<Published>
    /// Mirrors `Published.lsn`, so a committer whose commit another published skips the lock.
    private let publishedLSN = Atomic<UInt64>(0)

    /// Whether a caller leads (takes, writes and syncs a batch, or rotates). Taken without any lock,
    /// so that a committer waiting for a batch never contends for the lock appends take.
    private let leading = Atomic<Bool>(false)
    /// Notified when a leader stops: its waiters are covered, or the log failed, or one of them is to
    /// lead next.
    private let leaderStopped = EventCount()
    /// The commits a gathering leader waits for (0: none is gathering), and the event it sleeps on.
    private let gatherTarget = Atomic<Int>(0)
    private let batchGathered = EventCount()

    /// Committers waiting for a flush without a thread (the async API's, ``whenFlushed(upTo:_:)``):
    /// called back by the leader of the batch that covers them. Their lock is a leaf; no callback
    /// runs under it.
    private let callbacks = Mutex<[FlushCallback]>([])
    /// Mirrors `callbacks.count`, so that a leader with no one to call back skips the lock.
    private let callbackCount = Atomic<Int>(0)
    /// Whether a leader for the callbacks has been asked for and has not started yet: the committers
    /// registering meanwhile ask for no other.
    private let leaderRequested = Atomic<Bool>(false)

    /// A committer waiting for the log to cover `lsn`; `done` gets nil then, or the log's failure.
    private struct FlushCallback {
        let lsn: UInt64
        let done: @Sendable ((any Error)?) -> Void
    }

    /// Longest a leader waits for committers to join its batch. When the last batch made several
    /// committers durable, they are about to commit again, but on a busy or small machine they have not
    /// been scheduled yet when the next leader starts: without the wait it would sync one or two commits
    /// at a time, each sync costing what a sync of all of them costs. The wait ends as soon as as many
    /// commits are buffered as the last batch held (MySQL's binlog_group_commit_sync_delay with
    /// ..._no_delay_count, with the count learnt from the last batch); it never happens while one
    /// writer commits alone. In nanoseconds.
    static let gatherDelay: Int64 = 200_000

    /// How long a task polls a writer lock another transaction holds before it gives up and waits on
    /// a store thread: a commit holds it for a few µs, and the two cooperative threads of a 2-core
    /// machine committing in turn meet there often; a long body is not waited for.
    static let uncontendedSpin: UInt64 = 20_000

    init(core: Core, log: WriteAheadLog, packs: PackStore, records: SortedMap<String, Record>, limits: Store.Limits,
         durability: Store.Durability, packBytesLimit: Int, metrics: StoreMetrics, logger: Logger, clock: @escaping @Sendable () -> UInt32) {
        self.metrics = metrics
        self.logger = logger
        self.core = core
        self.log = log
        self.packs = packs
        self.limits = limits
        self.durability = durability
        self.packBytesLimit = packBytesLimit
        self.clock = clock
        published = Mutex(Published(records: records))
    }

    // MARK: Transactions

    /// Runs `body` as one transaction and commits what it changed; returns its result and whether it
    /// committed anything. Returns once the commit (or, for a transaction that changed nothing, the
    /// state it saw) is durable, or written with ``Store/Durability/none``.
    func write<T>(_ body: (inout Transaction) throws -> T) throws -> (result: T, committed: Bool) {
        let (result, committed, flushTo) = try writeWithoutFlushing(body)
        try flush(upTo: flushTo, synchronously: durability == .full)
        return (result, committed)
    }

    /// ``write(_:)`` up to the flush: runs `body` and appends its commit; returns its result, whether
    /// it committed anything, and the LSN that must be flushed (``flush(upTo:synchronously:)`` or
    /// ``whenFlushed(upTo:_:)``) before the caller learns of it.
    func writeWithoutFlushing<T>(_ body: (inout Transaction) throws -> T) throws -> (result: T, committed: Bool, flushTo: UInt64) {
        writer.lock()
        return try writeLocked(body)
    }

    /// ``writeWithoutFlushing(_:)`` if no transaction is running, or one ends within
    /// ``uncontendedSpin``; nil (and `body` not run) otherwise: for a caller that must not wait for
    /// the writer lock (a task on the cooperative pool).
    func writeWithoutFlushingIfUncontended<T>(_ body: (inout Transaction) throws -> T) throws -> (result: T, committed: Bool, flushTo: UInt64)? {
        guard SpinWait.until(nanoseconds: Self.uncontendedSpin, { writer.tryLock() }) else { return nil }
        return try writeLocked(body)
    }

    /// ``writeWithoutFlushing(_:)`` once the writer lock is taken; releases it.
    private func writeLocked<T>(_ body: (inout Transaction) throws -> T) throws -> (result: T, committed: Bool, flushTo: UInt64) {
        let result: T
        let flushTo: UInt64
        let committed: Bool
        do {
            // Released before the flush, so the next transaction joins this one's group commit.
            defer { writer.unlock() }
            let changes: [LogRecord.Change]
            do {
                // Ends before the commit: a base still held would make it copy the path it changes.
                let (base, sequence, recentCommits) = core.withLock { ($0.state.records, $0.state.commitSequence, $0.state.recentCommits) }
                var transaction = Transaction(base: base, limits: limits, baseSequence: sequence, recentCommits: recentCommits)
                result = try body(&transaction)
                changes = transaction.changes.map { LogRecord.Change(key: $0.key, record: $0.value) }
            }
            if !changes.isEmpty, let lsn = try commit(changes) {
                flushTo = lsn
                committed = true
            } else {
                // A transaction that changed nothing still returns only once the state it saw is durable:
                // it may have read (or rewritten unchanged) a commit that another writer has not synced yet.
                // (Read only then: it takes the lock every committer contends for.)
                flushTo = log.appendedLSN
                committed = false
            }
        }
        return (result, committed, flushTo)
    }

    /// Applies and logs a transaction's changes under the core lock; returns the commit's LSN, or nil
    /// when none of them changes anything (nothing is logged then). The records are changed first,
    /// each key walked to once for the change and the record it replaces, and put back if a check or
    /// the append fails: nothing a reader sees changes before the log has the commit.
    private func commit(_ changes: [LogRecord.Change]) throws -> UInt64? {
        let lsn = try core.whileOpen { held -> UInt64? in
            let staged = held.state.stage(changes)
            guard !staged.changes.isEmpty else { return nil }
            // Taken under the lock so commit times rise with LSNs (``Published/horizon`` relies on it).
            let time = clock()
            let deltas: [Digest: Int]
            let lsn: UInt64
            do {
                deltas = try Self.checked(staged, in: held.state)
                lsn = try log.append(.commit(LogRecord.Commit(sequence: held.state.commitSequence + 1, time: time, changes: staged.changes)))
            } catch {
                held.state.undo(staged)
                throw error
            }
            held.state.complete(staged, deltas: deltas, time: time)
            published.withLock { $0.applied(lsn: lsn, time: time) }
            return lsn
        }
        guard let lsn else { return nil }
        let target = gatherTarget.load(ordering: .sequentiallyConsistent)
        if target > 0, log.bufferedCommits >= target,
           gatherTarget.compareExchange(expected: target, desired: 0, ordering: .sequentiallyConsistent).exchanged {
            batchGathered.notifyAll()
        }
        return lsn
    }

    /// The reference count changes of `staged` in `state`, once every reference it adds names a blob
    /// the store holds (`missingBlob` otherwise).
    private static func checked(_ staged: StoreState.StagedCommit, in state: StoreState) throws -> [Digest: Int] {
        if let missing = state.firstMissingReference(in: staged) {
            throw StoreError(
                code: .missingBlob,
                message: "record \"\(Store.describe(missing.key))\" references blob \(missing.digest), which the store does not hold")
        }
        do {
            return try state.referenceDeltas(of: staged)
        } catch {
            // The counts only ever hold what the records do, so unreachable short of a bug.
            throw StoreError(code: .corrupted, message: "commit could not be applied: \(error)")
        }
    }

    // MARK: Group commit

    /// Returns once the log is written up to `lsn` (and, when `synchronously`, durable), and what it
    /// covers is published.
    ///
    /// The first caller to find no leader leads a batch; the others sleep until it stops, then return
    /// if it covered them, or else one of them leads the next batch.
    func flush(upTo lsn: UInt64, synchronously: Bool) throws {
        do {
            while true {
                let covered = synchronously ? log.durableLSN : log.writtenLSN
                if covered >= lsn { break }
                if log.hasFailed { throw log.currentFailure }
                if startLeading() {
                    defer { stopLeading() }
                    if synchronously { gather() }
                    try leadBatch(synchronously: synchronously)
                } else {
                    waitForLeader()
                }
            }
        } catch {
            // The log refuses further writes until the store is reopened.
            logger.error("the write-ahead log could not be written or synced", metadata: ["path": "\(log.directory)", "error": "\(error)"])
            throw error
        }
        publish(upTo: lsn, synchronously: synchronously)
    }

    /// Calls `done` once the log covers `lsn` as ``Store/Configuration/durability`` asks and what it
    /// covers is published (nil), or with the log's failure, without holding a thread meanwhile: the
    /// leader of the covering batch calls it, on its own thread. When no one leads, `leader` is given
    /// the work of leading: it runs it here (a thread that may block), or hands it to a thread that
    /// may (a task on the cooperative pool must not write or sync the log). A leader goes on leading
    /// while committers wait this way.
    ///
    /// Each committer of the async API thereby costs at most one wake-up (its task's), where waiting
    /// on a thread costs two (the thread's, then the task's).
    func whenFlushed(upTo lsn: UInt64, leader: @Sendable (@escaping @Sendable () -> Void) -> Void,
                     _ done: @escaping @Sendable ((any Error)?) -> Void) {
        callbacks.withLock { callbacks in
            callbacks.append(FlushCallback(lsn: lsn, done: done))
            callbackCount.store(callbacks.count, ordering: .sequentiallyConsistent)
        }
        // Registered first: a leader that stops after this check finds the callback (`stopLeading`).
        guard !leading.load(ordering: .sequentiallyConsistent),
              leaderRequested.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged
        else { return }
        leader { [self] in
            leaderRequested.store(false, ordering: .sequentiallyConsistent)
            leadForCallbacks()
        }
    }

    /// Leads batches while committers wait for callbacks and no one else leads, calling back those each
    /// batch covers. A committer registers and then tries to lead; a leader gives up the lead and then
    /// looks for committers: with sequentially consistent atomics one of the two sees the other, so
    /// no committer is left without a leader.
    private func leadForCallbacks() {
        let synchronously = durability == .full
        while callbackCount.load(ordering: .sequentiallyConsistent) > 0, startLeading() {
            defer { releaseLead() }
            guard callBack() else { continue }
            do {
                if synchronously { gather() }
                try leadBatch(synchronously: synchronously)
                callBack()
            } catch {
                logger.error("the write-ahead log could not be written or synced", metadata: ["path": "\(log.directory)", "error": "\(error)"])
                callBack(failure: error)
            }
        }
    }

    /// Calls back the committers the log covers (all of them with `failure`, or the log's failure once
    /// it has failed); returns whether any remain.
    @discardableResult
    private func callBack(failure: (any Error)? = nil) -> Bool {
        let failure = failure ?? (log.hasFailed ? log.currentFailure : nil)
        let covered = durability == .full ? log.durableLSN : log.writtenLSN
        let (due, remaining) = callbacks.withLock { callbacks in
            var due: [FlushCallback] = []
            if failure != nil || callbacks.contains(where: { $0.lsn <= covered }) {
                due = callbacks.filter { failure != nil || $0.lsn <= covered }
                callbacks.removeAll { failure != nil || $0.lsn <= covered }
                callbackCount.store(callbacks.count, ordering: .sequentiallyConsistent)
            }
            return (due, callbacks.count)
        }
        if failure == nil, let last = due.map(\.lsn).max() { publish(upTo: last, synchronously: durability == .full) }
        for callback in due { callback.done(failure) }
        return remaining > 0
    }

    /// Everything appended so far, flushed as ``Store/Configuration/durability`` asks.
    func flushAppended() throws {
        try flush(upTo: log.appendedLSN, synchronously: durability == .full)
    }

    /// Runs `body` as the leader, once the current one stops: no batch is taken or written meanwhile.
    /// Taken before the core lock: a leader may be waiting for that lock to take its batch.
    func whileLeading<T>(_ body: () throws -> T) throws -> T {
        while !startLeading() { waitForLeader() }
        defer { stopLeading() }
        return try body()
    }

    /// Flushes everything durably and starts a new segment; returns its number: what a checkpoint
    /// covers ends here. REQUIRES: the lead (``whileLeading(_:)``) and the core lock held (`held`), so
    /// no record can land on either side of the cut by accident.
    func rotate(_ held: inout Core.Held) throws -> UInt64 {
        precondition(leading.load(ordering: .relaxed), "rotate() needs the lead")
        let (batch, plan) = try takeBatch(synchronously: true, upTo: held.state.records)
        try write(batch, plan, synchronously: true)
        return try startNextSegment()
    }

    /// Flushes everything durably and leaves the log as a closed store keeps it. REQUIRES: appends
    /// stopped (the core closed).
    func close() throws {
        try whileLeading {
            try leadBatch(synchronously: true)
            try log.trimForClose()
        }
    }

    private func startLeading() -> Bool {
        leading.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged
    }

    /// Gives up the lead and wakes everyone waiting for it; committers waiting for callbacks that the
    /// last batch did not cover get a leader on a thread of the system's, not this caller's (a thread
    /// waiting for its own commit must not be kept leading for others).
    private func stopLeading() {
        releaseLead()
        guard callbackCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        callBack()
        guard callbackCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        DispatchQueue.global().async { self.leadForCallbacks() }
    }

    private func releaseLead() {
        leading.store(false, ordering: .sequentiallyConsistent)
        leaderStopped.notifyAll()
    }

    /// Sleeps until the current leader (if any) stops.
    private func waitForLeader() {
        let key = leaderStopped.key
        if leading.load(ordering: .sequentiallyConsistent) { leaderStopped.wait(key) }
    }

    /// Waits, at most ``gatherDelay``, for as many commits as the last batch held.
    private func gather() {
        let target = log.lastBatchCommits
        let key = batchGathered.key
        gatherTarget.store(target, ordering: .sequentiallyConsistent)
        // Checked after the target is set: a commit appended before it was set notifies no one.
        defer { gatherTarget.store(0, ordering: .sequentiallyConsistent) }
        guard log.bufferedCommits < target else { return }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(Self.gatherDelay)
        while batchGathered.key == key {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            batchGathered.wait(key, timeoutNanoseconds: Int64(deadline - now))
        }
    }

    /// Takes, writes and (when `synchronously`) syncs the next batch. REQUIRES: the lead.
    private func leadBatch(synchronously: Bool) throws {
        let (batch, plan) = try core.withLock { held in try takeBatch(synchronously: synchronously, upTo: held.state.records) }
        try write(batch, plan, synchronously: synchronously)
    }

    /// Takes the next batch, with what makes the pack bytes its records may refer to durable, and notes
    /// the records as of its end (`records`, the core's) for publishing. REQUIRES: the lead, and the
    /// core lock held: no record is appended meanwhile, so every record the batch takes was appended
    /// after the pack appends the plan names.
    private func takeBatch(synchronously: Bool, upTo records: SortedMap<String, Record>) throws -> (WriteAheadLog.Batch, PackCommitPlan) {
        assert(leading.load(ordering: .relaxed), "REQUIRES: the lead")
        try log.checkHealthy()
        let plan: PackCommitPlan
        do {
            if synchronously {
                plan = try packs.prepareCommit(loggingUpTo: packBytesLimit)
            } else {
                // Written, not synced: what the records refer to must be in the files a killed process leaves.
                try packs.writeDeferred()
                plan = PackCommitPlan()
            }
        } catch {
            throw log.fail(error)
        }
        let batch = try log.takeBatch(carrying: plan.logged)
        published.withLock { $0.taken(records, upTo: batch.endLSN) }
        return (batch, plan)
    }

    /// Makes the batch's pack bytes durable as `plan` says, then writes (and syncs) the batch. A
    /// segment that reaches its size limit is followed by the next. REQUIRES: the lead.
    private func write(_ batch: WriteAheadLog.Batch, _ plan: PackCommitPlan, synchronously: Bool) throws {
        assert(leading.load(ordering: .relaxed), "REQUIRES: the lead")
        if synchronously {
            do {
                try packs.synchronize(plan)
            } catch {
                throw log.fail(error)
            }
        }
        try log.write(batch, synchronously: synchronously)
        if synchronously { metrics.walSynced() }
        if log.isSegmentFull { _ = try startNextSegment() }
    }

    /// Syncs every pack, also the bytes batches carried (a checkpoint rotates, and then lets the
    /// segments that carried them go), then has the log start its next segment.
    private func startNextSegment() throws -> UInt64 {
        do {
            try packs.synchronize()
        } catch {
            throw log.fail(error)
        }
        return try log.startNextSegment()
    }

    // MARK: Publication

    /// Publishes the records up to `lsn`, once the log covers it. The first committer of a batch to get
    /// here publishes all of it; the others skip the lock.
    private func publish(upTo lsn: UInt64, synchronously: Bool) {
        guard publishedLSN.load(ordering: .acquiring) < lsn else { return }
        let covered = max(lsn, synchronously ? log.durableLSN : log.writtenLSN)
        // The replaced versions are returned, so they are freed after the lock is released, and on
        // the releaser's thread: freeing the nodes only they hold (a copied path per commit, 63
        // entries a node) is not the committer's work (Docs/benchmarks/analysis.md, section 15).
        let replaced = published.withLock { published in
            let (lsn, replaced) = published.publish(upTo: covered)
            publishedLSN.store(lsn, ordering: .releasing)
            return replaced
        }
        if !replaced.isEmpty { DeferredRelease.shared.release(replaced) }
    }
}
