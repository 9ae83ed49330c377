import Foundation
import Synchronization
import Testing
@testable import ContentStore

/// The record states a store may be in after a failure: every acknowledged commit applied, with or
/// without each commit whose fate is open (the one in flight at a crash, or one whose `write`
/// failed with `io`; after such a failure the log refuses everything, so in practice there is one).
///
/// Transactions in these workloads are blind writes (fixed new records per key), so a commit's
/// effect does not depend on the state it lands on.
final class Journal: Sendable {
    typealias Changes = [String: Record?]
    typealias State = [String: Record]

    private struct Contents {
        var candidates: Set<State> = [[:]]
        var inFlight: Changes?
        var acknowledged = 0
        var maybeApplied = 0
    }
    private let contents = Mutex(Contents())

    static func applying(_ changes: Changes, to state: State) -> State {
        var state = state
        for (key, record) in changes { state[key] = record }
        return state
    }

    /// A commit is about to be attempted.
    func begin(_ changes: Changes) {
        contents.withLock { $0.inFlight = changes }
    }

    /// `write` returned: the commit must survive anything from now on.
    func acknowledge() {
        contents.withLock { contents in
            guard let changes = contents.inFlight else { return }
            contents.candidates = Set(contents.candidates.map { Journal.applying(changes, to: $0) })
            contents.inFlight = nil
            contents.acknowledged += 1
        }
    }

    /// `write` threw. An `io` error leaves open whether the commit reached the disk; any other
    /// error is raised before the commit is logged.
    func fail(_ error: any Error) {
        contents.withLock { contents in
            guard let changes = contents.inFlight else { return }
            contents.inFlight = nil
            if (error as? StoreError)?.code == .io {
                contents.maybeApplied += 1
                contents.candidates.formUnion(contents.candidates.map { Journal.applying(changes, to: $0) })
            }
        }
    }

    /// The states a crash now may leave: the commit in flight may or may not have made it.
    var candidates: Set<State> {
        contents.withLock { contents in
            guard let changes = contents.inFlight else { return contents.candidates }
            return contents.candidates.union(contents.candidates.map { Journal.applying(changes, to: $0) })
        }
    }

    var acknowledged: Int { contents.withLock { $0.acknowledged } }
}

/// Runs a workload against a store, recording what it acknowledged. Operations that fail are
/// recorded and the workload goes on (faults make some of them fail); when opening fails, the
/// operations until the next open are skipped.
final class WorkloadRunner {
    let storeURL: URL
    var configuration: Store.Configuration
    /// What the workload substitutes inside the store: the I/O, and small WAL and pack-logging sizes.
    var seams: Store.Seams
    let journal = Journal()
    let clock: TestClock
    var random: SeededRandom
    private(set) var store: Store?
    /// Blobs put that a record may reference.
    var blobs: [Digest] = []
    /// Every error an operation threw, in order.
    private(set) var errors: [any Error] = []
    /// Commits the open store acknowledged after a sync of one of its WAL segments had failed. It
    /// must refuse them ("reopen the store"): a later sync may succeed without covering what the
    /// failed one lost ("fsyncgate").
    private(set) var commitsAcknowledgedAfterAFailedLogSync = 0
    /// Puts the open store accepted after a sync of one of its packs had failed (the pack store
    /// fails for good: a later sync of the pack could vouch for bytes the kernel dropped).
    private(set) var putsAfterAFailedPackSync = 0
    /// Which data files' syncs failed in the store open now.
    private var logSyncFailed = false, packSyncFailed = false

    init(storeURL: URL, fileIO: any FileIO, seed: UInt64) {
        self.storeURL = storeURL
        clock = TestClock()
        random = SeededRandom(seed: seed)
        configuration = Store.Configuration()
        configuration.durability = .full
        configuration.packSizeTarget = 64 * 1024
        configuration.walSegmentSize = 64 * 1024
        // Small, so segments are extended by zeros many times each: power cuts land in extensions,
        // in batches written over zeros and in the truncations of rotation and close.
        seams = Store.Seams()
        seams.walPreallocation = 4 * 1024
        // Small, so both ways a commit makes pack bytes durable occur: carried by the WAL, and synced.
        seams.loggedPackBytesLimit = 16 * 1024
        // Blobs over 24 KiB (only chunkedBlobs's) are chunked into 1 KiB chunks under manifest trees.
        configuration.chunking = ChunkingParameters(minimumSize: 256, averageSize: 1024, maximumSize: 4096)
        configuration.chunkingThreshold = 24 * 1024
        configuration.now = { [clock] in clock.now }
        seams.fileIO = fileIO
    }

    private func record(_ error: any Error) {
        errors.append(error)
        // Only the data files' syncs: a checkpoint whose sync failed is abandoned (the log still
        // holds everything), and a directory's failed sync after deletions puts nothing acknowledged at stake.
        guard let failure = error as? StoreError, let call = (failure.cause as? SystemError)?.call,
              call == "fsync" || call == "fdatasync", let path = failure.path else { return }
        if path.hasSuffix(".log") { logSyncFailed = true }
        if path.hasSuffix(".pack") { packSyncFailed = true }
    }

    func open() {
        guard store == nil else { return }
        do {
            store = try Store(at: storeURL, configuration: configuration, seams: seams)
            (logSyncFailed, packSyncFailed) = (false, false)
        } catch {
            record(error)
        }
    }

    func close() {
        guard let store else { return }
        self.store = nil
        do { try store.close() } catch { record(error) }
    }

    func reopen() {
        close()
        open()
    }

    @discardableResult
    func put(_ data: Data) -> Digest? {
        guard let store else { return nil }
        do {
            let digest = try store.put(data)
            blobs.append(digest)
            if packSyncFailed { putsAfterAFailedPackSync += 1 }
            return digest
        } catch {
            record(error)
            return nil
        }
    }

    func putRandomBlobs(_ count: Int, size: ClosedRange<Int>) -> [Digest] {
        (0 ..< count).compactMap { _ in
            let length = size.lowerBound + Int(random.next() % UInt64(size.count))
            return put(random.next() % 2 == 0 ? random.bytes(length) : random.compressibleBytes(length))
        }
    }

    func commit(_ changes: Journal.Changes) {
        guard let store, !changes.isEmpty else { return }
        journal.begin(changes)
        do {
            try store.write { tx in
                for (key, record) in changes {
                    if let record { try tx.setRecord(record, forKey: key) } else { try tx.removeRecord(forKey: key) }
                }
            }
            journal.acknowledge()
            if logSyncFailed { commitsAcknowledgedAfterAFailedLogSync += 1 }
        } catch {
            journal.fail(error)
            record(error)
        }
    }

    /// A commit of 1–3 random changes to keys `prefix0 ..< prefix<keys>`, referencing `fresh` and
    /// earlier blobs.
    func randomCommit(keys: Int, prefix: String = "k", fresh: [Digest]) {
        var changes: Journal.Changes = [:]
        for _ in 0 ... random.next() % 3 {
            let key = "\(prefix)\(random.next() % UInt64(keys))"
            if random.next() % 5 == 0 {
                changes[key] = .some(nil)
            } else {
                var references = fresh
                if !blobs.isEmpty, random.next() % 2 == 0 { references.append(blobs[Int(random.next() % UInt64(blobs.count))]) }
                let length = 200 + Int(random.next() % 2800)
                changes[key] = Record(value: random.bytes(length), references: references)
            }
        }
        commit(changes)
    }

    func checkpoint() {
        guard let store else { return }
        do {
            try store.checkpoint()
        } catch {
            record(error)
        }
    }

    func collectGarbage(dryRun: Bool = false) {
        guard let store else { return }
        do {
            _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: nil, dryRun: dryRun))
            blobs = blobs.filter { store.contains($0) }
        } catch {
            record(error)
        }
    }
}

/// The core workloads the power-loss and I/O-fault sweeps run: each creates its store, so store
/// creation is swept too.
enum CoreWorkload: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// Puts and multi-record commits; packs fill and seal, a WAL segment fills; a reopen midway.
    case commits
    /// Commits around checkpoints, a reopen, and a checkpoint after recovery.
    case checkpoint
    /// A mostly dead sealed pack is rewritten by collection; more commits; a second rewrite after a reopen.
    case packRewrite
    /// Garbage blobs dropped and a wholly dead pack deleted; a dry run; a second collection after a reopen.
    case collection
    /// Small blobs committed one by one, their pack bytes carried by the WAL instead of a pack sync;
    /// a large blob whose pack is synced; a reopen and a checkpoint between.
    case smallCommits
    /// Versions of a chunked blob sharing most chunks; versions dropped and collected through their
    /// manifest trees (the cascade), with a reopen and a checkpoint between.
    case chunkedBlobs

    var testDescription: String { rawValue }

    func run(_ runner: WorkloadRunner) {
        runner.open()
        switch self {
        case .commits:
            for step in 0 ..< 22 {
                let fresh = runner.putRandomBlobs(1 + Int(runner.random.next() % 3), size: 200 ... 6000)
                runner.randomCommit(keys: 10, fresh: fresh)
                if step == 11 { runner.reopen() }
            }
        case .checkpoint:
            for round in 0 ..< 3 {
                for _ in 0 ..< 6 {
                    runner.randomCommit(keys: 8, fresh: runner.putRandomBlobs(1, size: 100 ... 3000))
                }
                runner.checkpoint()
                if round == 1 { runner.reopen() }
            }
        case .packRewrite:
            // Pack 1 fills with 6 KB blobs, each referenced by its own record, and is sealed.
            let first = runner.putRandomBlobs(14, size: 6000 ... 6000)
            runner.commit(Dictionary(uniqueKeysWithValues: first.enumerated().map { ("b\($0.offset)", Record(value: Data([1]), references: [$0.element])) }))
            // Most of pack 1 becomes garbage; collection drops it and rewrites the pack.
            runner.commit(Dictionary(uniqueKeysWithValues: (0 ..< 10).filter { $0 != 3 }.map { ("b\($0)", Record?.none) }))
            runner.clock.advance(by: 7200)
            runner.collectGarbage()
            runner.randomCommit(keys: 4, prefix: "r", fresh: runner.putRandomBlobs(2, size: 1000 ... 6000))
            runner.reopen()
            let second = runner.putRandomBlobs(12, size: 6000 ... 6000)
            runner.commit(Dictionary(uniqueKeysWithValues: second.enumerated().map { ("c\($0.offset)", Record(value: Data([2]), references: [$0.element])) }))
            runner.commit(Dictionary(uniqueKeysWithValues: (0 ..< 14).filter { $0 != 3 }.map { ("b\($0)", Record?.none) } + (0 ..< 8).map { ("c\($0)", Record?.none) }))
            runner.clock.advance(by: 7200)
            runner.collectGarbage()
            runner.randomCommit(keys: 4, prefix: "r", fresh: runner.putRandomBlobs(1, size: 100 ... 1000))
        case .collection:
            // Garbage that no record ever references fills pack 1; two referenced blobs land in pack 2.
            _ = runner.putRandomBlobs(12, size: 6000 ... 6000)
            let kept = runner.putRandomBlobs(2, size: 6000 ... 6000)
            runner.commit(["kept": Record(value: Data([1]), references: kept)])
            runner.clock.advance(by: 7200)
            runner.collectGarbage(dryRun: true)
            runner.collectGarbage()
            runner.randomCommit(keys: 4, fresh: runner.putRandomBlobs(2, size: 500 ... 3000))
            runner.reopen()
            runner.commit(["kept": Record?.none])
            runner.clock.advance(by: 7200)
            runner.collectGarbage()
            runner.randomCommit(keys: 4, fresh: runner.putRandomBlobs(1, size: 500 ... 3000))
        case .smallCommits:
            for step in 0 ..< 14 {
                let large = step == 6 ? runner.put(runner.random.bytes(runner.seams.loggedPackBytesLimit + 4096)) : nil
                runner.randomCommit(keys: 6, fresh: runner.putRandomBlobs(1, size: 100 ... 3000) + (large.map { [$0] } ?? []))
                if step == 8 { runner.reopen() }
                if step == 11 { runner.checkpoint() }
            }
        case .chunkedBlobs:
            // Compressible and over 64 KiB (128 average chunks / 2), so the first version trains a
            // chunk dictionary and its pack holds one (Docs/chunking.md#dictionaries).
            var content = runner.random.compressibleBytes(80_000)
            for version in 0 ..< 4 {
                let offset = Int(runner.random.next() % 79_000)
                content.replaceSubrange(offset ..< offset + 512, with: runner.random.bytes(512))
                if let digest = runner.put(content) {
                    runner.commit(["v\(version)": Record(value: Data([UInt8(version)]), references: [digest])])
                }
                if version == 1 { runner.reopen() }
            }
            runner.commit(["v0": Record?.none, "v1": Record?.none])
            runner.clock.advance(by: 7200)
            runner.collectGarbage()
            runner.checkpoint()
            runner.reopen()
            runner.commit(["v2": Record?.none])
            runner.clock.advance(by: 7200)
            runner.collectGarbage()
            runner.randomCommit(keys: 4, fresh: runner.putRandomBlobs(1, size: 500 ... 3000))
        }
        runner.close()
    }
}

/// Opens a store recovered from a crash or fault and checks it: it opens; its records are one of
/// `candidates` (every acknowledged commit, and a committed prefix); `verify(readData: true)` is
/// clean; and it is usable: a put and a commit survive a reopen.
///
/// Returns the records found, or nil when a check failed (already recorded as an issue).
@discardableResult
func checkRecoveredStore(at url: URL, candidates: Set<Journal.State>, io: any FileIO = UnsyncedFileIO(), _ label: String,
                         sourceLocation: SourceLocation = #_sourceLocation) -> Journal.State? {
    let configuration = Store.Configuration()
    var seams = Store.Seams()
    seams.fileIO = io
    do {
        let store = try Store(at: url, configuration: configuration, seams: seams)
        let records = try allRecords(store)
        guard candidates.contains(records) else {
            let sizes = candidates.map(\.count).sorted()
            Issue.record("\(label): recovered \(records.count) records, not a committed prefix (candidates have \(sizes) records)",
                         sourceLocation: sourceLocation)
            return nil
        }
        let report = try store.verify(VerificationOptions(readData: true))
        guard report.isClean else {
            Issue.record("\(label): verify found \(report.problems)", sourceLocation: sourceLocation)
            return nil
        }
        let digest = try store.put(Data("after recovery \(label)".utf8))
        let after = Record(value: Data("after".utf8), references: [digest])
        try store.write { try $0.setRecord(after, forKey: "reliability/after-recovery") }
        try store.close()
        let reopened = try Store(at: url, configuration: configuration, seams: seams)
        var expected = records
        expected["reliability/after-recovery"] = after
        let again = try allRecords(reopened)
        let cleanAgain = try reopened.verify(VerificationOptions(readData: false)).isClean
        try reopened.close()
        guard again == expected, cleanAgain else {
            Issue.record("\(label): the store did not keep a commit made after recovery (clean: \(cleanAgain))", sourceLocation: sourceLocation)
            return nil
        }
        return records
    } catch {
        Issue.record("\(label): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Runs `workload` on a ``PowerCutFileIO`` disk rooted at `disk` (created here), calling `onSync`
/// before each of its syncs with the journal as it stands then: the moment to take images of a cut.
/// Records an issue if the workload itself failed (there are no faults).
func runOnPowerCutDisk(_ workload: CoreWorkload, disk: URL,
                       onSync: @escaping @Sendable (_ disk: PowerCutFileIO, _ index: Int, _ journal: Journal) -> Void,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> (runner: WorkloadRunner, io: PowerCutFileIO) {
    try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
    let journalBox = Mutex<Journal?>(nil)
    let io = PowerCutFileIO(root: disk) { disk, index in
        guard let journal = journalBox.withLock({ $0 }) else { return }
        onSync(disk, index, journal)
    }
    let runner = WorkloadRunner(storeURL: disk.appendingPathComponent("store"), fileIO: io, seed: 0x5eed)
    journalBox.withLock { $0 = runner.journal }
    workload.run(runner)
    #expect(runner.errors.isEmpty, "the workload itself failed: \(runner.errors)", sourceLocation: sourceLocation)
    return (runner, io)
}

/// An integer from the environment (for longer runs of the sweeps and soaks), or `default`.
func environmentInteger(_ name: String, default value: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? value
}
