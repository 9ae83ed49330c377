import Foundation
import Synchronization
import Testing
@testable import ContentStore

@Suite struct AsyncAPITests {
    /// Every twin, called with DESIGN's exact signature: the function types pin the async overloads.
    @Test func everyTwinHasTheDesignedSignature() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let put: (Data) async throws -> Digest = store.put
        let get: (Digest) async throws -> Data = store.get
        let putFile: (URL) async throws -> Digest = store.put(contentsOf:)
        let export: (Digest, URL) async throws -> Void = store.export
        let record: (String) async throws -> Record? = store.record(forKey:)
        let keys: (String) async throws -> [String] = store.keys(withPrefix:)
        let collect: (GarbageCollectionOptions) async throws -> GarbageCollectionReport = store.collectGarbage
        let checkpoint: () async throws -> Void = store.checkpoint
        let verify: (VerificationOptions) async throws -> VerificationReport = store.verify
        let statistics: () async throws -> Statistics = store.statistics
        let close: () async throws -> Void = store.close

        let digest = try await put(Data("hello".utf8))
        #expect(try await get(digest) == Data("hello".utf8))
        let source = dir.url.appendingPathComponent("source")
        try Data("from a file".utf8).write(to: source)
        let fileDigest = try await putFile(source)
        #expect(fileDigest == Digest.sha256(Data("from a file".utf8)))
        let exported = dir.url.appendingPathComponent("exported")
        try await export(fileDigest, exported)
        #expect(try Data(contentsOf: exported) == Data("from a file".utf8))

        let count = try await store.write { tx in
            try tx.setRecord(Record(value: Data("v".utf8), references: [digest]), forKey: "a")
            return 1
        }
        #expect(count == 1)
        #expect(try await record("a")?.references == [digest])
        #expect(try await keys("") == ["a"])
        let value = try await store.read { snapshot in try snapshot.record(forKey: "a")?.value }
        #expect(value == Data("v".utf8))
        // Defaulted arguments, as DESIGN writes them.
        _ = try await store.collectGarbage()
        _ = try await store.verify()

        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        let report = try await collect(options)
        #expect(report.blobsRemoved == 1)  // the file's blob: nothing references it
        try await checkpoint()
        #expect(try await verify(VerificationOptions(readData: true)).isClean)
        let stats = try await statistics()
        #expect(stats.blobCount == 1 && stats.recordCount == 1)
        try await close()
        try await close()  // idempotent
        await #expect(throws: StoreError(code: .closed, message: "")) { try await get(digest) }
    }

    /// A transaction holds the writer for 2 s on a plain thread. 64 tasks awaiting `write` meanwhile
    /// wait on the store's threads, not the cooperative pool: a ticker task on that pool finishes 100
    /// yields long before the 2 s pass. Cancelled, the waiting tasks get `CancellationError` and commit
    /// nothing.
    ///
    /// Other suites' synchronous tests share the pool (two threads here) and can hold it for a minute
    /// and more (the soak tests): the holder then keeps the writer until the ticker is done (5 minutes
    /// at most), so the ticker must progress while the writer is held — which waiters parked on the
    /// pool would prevent — and the 2 s bound is checked against a ticker measured alone just before.
    @Test func waitingWritersLeaveTheCooperativePoolFree() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let holding = Flag()
        let tickerFinished = Flag()
        let released = Flag()
        let holder = Thread {
            try? store.write { tx in
                holding.set()
                try tx.setRecord(Record(value: Data("held".utf8)), forKey: "holder")
                let started = Date()
                Thread.sleep(forTimeInterval: 2)
                while !tickerFinished.isSet && Date().timeIntervalSince(started) < 300 { Thread.sleep(forTimeInterval: 0.01) }
            }
            released.set()
        }
        let tick: @Sendable () async -> Duration = {
            let started = ContinuousClock.now
            for _ in 0 ..< 100 { await Task.yield() }
            return ContinuousClock.now - started
        }
        let alone = await Task { await tick() }.value
        holder.start()
        while !holding.isSet { try await Task.sleep(for: .milliseconds(5)) }

        let waiters = (0 ..< 64).map { index in
            Task {
                try await store.write { tx in try tx.setRecord(Record(value: Data([UInt8(index)])), forKey: "waiter/\(index)") }
            }
        }
        // Let every waiter reach the store.
        try await Task.sleep(for: .milliseconds(200))
        let withWaiters = await Task { await tick() }.value
        tickerFinished.set()
        #expect(!released.isSet, "the ticker needed the writer released: waiters occupied the pool")
        if alone < .milliseconds(200) {
            #expect(withWaiters < .seconds(1), "100 yields took \(withWaiters) with 64 waiters, \(alone) alone")
        }

        for waiter in waiters { waiter.cancel() }
        for waiter in waiters {
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
        while !released.isSet { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try await store.keys(withPrefix: "waiter/").isEmpty)
        #expect(try await store.record(forKey: "holder")?.value == Data("held".utf8))
        try await store.close()
    }

    /// A write whose task is cancelled before it is called commits nothing; one whose body has run
    /// commits and returns normally even if the task is cancelled meanwhile.
    @Test func writeCancellationBeforeAndAfterTheBody() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await store.write { tx in try tx.setRecord(Record(value: Data("x".utf8)), forKey: "early") }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await store.record(forKey: "early") == nil)

        let bodyRunning = Flag()
        let late = Task {
            try await store.write { tx in
                bodyRunning.set()
                Thread.sleep(forTimeInterval: 0.2)
                try tx.setRecord(Record(value: Data("y".utf8)), forKey: "late")
                return 7
            }
        }
        while !bodyRunning.isSet { try await Task.sleep(for: .milliseconds(2)) }
        late.cancel()
        #expect(try await late.value == 7)
        #expect(try await store.record(forKey: "late")?.value == Data("y".utf8))
        try await store.close()
    }

    /// A collection cancelled after its first batch stops with `CancellationError`; the store is
    /// consistent (verify is clean) and a later collection removes the rest.
    @Test func collectionCancelledBetweenBatches() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let count = LocalEngine.collectionBatchSize * 3
        for index in 0 ..< count { try await store.put(Data("garbage \(index)".utf8)) }
        let keep = try await store.put(Data("kept".utf8))
        try await store.write { tx in try tx.setRecord(Record(references: [keep]), forKey: "keep") }

        let gate = ProgressGate { $0.phase == .droppingBlobs && $0.completed > 0 }
        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        let collection = Task { try await store.collectGarbage(options, progress: gate.report) }
        try await gate.waitUntilReached()
        collection.cancel()
        gate.open()
        await #expect(throws: CancellationError.self) { try await collection.value }

        let remaining = try await store.statistics().blobCount
        #expect(remaining > 1 && remaining < count + 1, "the first batch was removed, the rest not")
        #expect(try await store.verify(VerificationOptions(readData: true)).isClean)
        let rest = try await store.collectGarbage(options)
        #expect(rest.blobsRemoved == remaining - 1)
        #expect(try await store.get(keep) == Data("kept".utf8))
        try await store.close()
    }

    /// A verification cancelled between batches of blobs stops with `CancellationError`.
    @Test func verificationCancelledBetweenBatches() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        for index in 0 ..< 3000 { try await store.put(Data("blob \(index)".utf8)) }
        let gate = ProgressGate { $0.phase == .checkingBlobs && $0.completed > 0 && $0.completed < $0.total }
        let verification = Task { try await store.verify(VerificationOptions(readData: true), progress: gate.report) }
        try await gate.waitUntilReached()
        verification.cancel()
        gate.open()
        await #expect(throws: CancellationError.self) { try await verification.value }
        #expect(try await store.verify().isClean)
        try await store.close()
    }

    /// The long operations' checks between batches, driven by a cancelled token as an async twin's
    /// thread would carry it: a chunked put stores no root, an export leaves no file.
    @Test func streamingPutAndExportStopWhenCancelled() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.chunkingThreshold = 1 << 20
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 15)
        let content = random.bytes(4 << 20)
        let source = dir.url.appendingPathComponent("large")
        try content.write(to: source)
        let cancelled = CancellationToken()
        cancelled.cancel()

        #expect(throws: CancellationError.self) {
            try CancellationToken.$current.withValue(cancelled) { try store.put(contentsOf: source) }
        }
        #expect(!store.contains(Digest.sha256(content)))

        let digest = try store.put(contentsOf: source)
        let target = dir.url.appendingPathComponent("exported")
        #expect(throws: CancellationError.self) {
            try CancellationToken.$current.withValue(cancelled) { try store.export(digest, to: target) }
        }
        #expect(!FileManager.default.fileExists(atPath: target.path))
        try store.export(digest, to: target)
        #expect(try Data(contentsOf: target) == content)
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        try store.close()
    }

    /// Many tasks put, write and read at once through the twins; everything lands.
    @Test func concurrentTwinsAllLand() async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: .full))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0 ..< 200 {
                group.addTask {
                    let digest = try await store.put(Data("blob \(index)".utf8))
                    try await store.write { tx in try tx.setRecord(Record(value: Data("\(index)".utf8), references: [digest]), forKey: "k/\(index)") }
                    #expect(try await store.get(digest) == Data("blob \(index)".utf8))
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.keys(withPrefix: "k/").count == 200)
        #expect(try await store.verify().isClean)
        try await store.close()
    }

    /// Tasks awaiting commits and threads blocking on them, at once, in durable mode: every commit is
    /// visible to readers the moment its `write` returns (published before the task is resumed), and
    /// all of them are there after a reopen. Mixed, the two kinds lead batches for each other: a task's
    /// commit covered by a thread's batch is resumed by that thread, and a thread that stops leading
    /// with tasks left hands them on.
    @Test(arguments: [Store.Durability.full, .none])
    func awaitedAndBlockingCommitsAreVisibleWhenTheyReturnAndSurviveReopen(durability: Store.Durability) async throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: durability))
        let perWriter = 60
        let threadsDone = Mutex(0)
        let mismatches = Mutex<[String]>([])
        for thread in 0 ..< 4 {
            Thread {
                for index in 0 ..< perWriter {
                    let key = "thread/\(thread)/\(index)"
                    try? store.write { try $0.setRecord(Record(value: Data(key.utf8)), forKey: key) }
                    if (try? store.record(forKey: key))??.value != Data(key.utf8) { mismatches.withLock { $0.append(key) } }
                }
                threadsDone.withLock { $0 += 1 }
            }.start()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0 ..< 8 {
                group.addTask {
                    for index in 0 ..< perWriter {
                        let key = "task/\(task)/\(index)"
                        let returned = try await store.write { tx in
                            try tx.setRecord(Record(value: Data(key.utf8)), forKey: key)
                            return index
                        }
                        #expect(returned == index)
                        #expect(try await store.record(forKey: key)?.value == Data(key.utf8), "\(key) not visible when its write returned")
                    }
                }
            }
            try await group.waitForAll()
        }
        while threadsDone.withLock({ $0 }) < 4 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(mismatches.withLock { $0 }.isEmpty)
        try await store.close()

        let reopened = try Store(at: dir.store)
        #expect(try await reopened.keys(withPrefix: "task/").count == 8 * perWriter)
        #expect(try await reopened.keys(withPrefix: "thread/").count == 4 * perWriter)
        try await reopened.close()
    }

    /// When the sync of the batch covering awaited commits fails, every awaiting task gets the error
    /// (none is left suspended), and the store refuses later commits, awaited or not.
    @Test func awaitedCommitsWhoseSyncFailsGetTheError() async throws {
        let dir = TemporaryDirectory()
        let failing = Atomic<Bool>(false)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            call == .sync && path.contains("/wal/") && failing.load(ordering: .acquiring) ? EIO : nil
        }
        let store = try Store(at: dir.store, configuration: .testing(durability: .full), seams: seams)
        try await store.write { try $0.setRecord(Record(value: Data("before".utf8)), forKey: "before") }
        failing.store(true, ordering: .releasing)
        let outcomes = try await withThrowingTaskGroup(of: StoreError.Code?.self) { group in
            for index in 0 ..< 16 {
                group.addTask {
                    do {
                        try await store.write { try $0.setRecord(Record(value: Data([UInt8(index)])), forKey: "failed/\(index)") }
                        return nil
                    } catch let error as StoreError {
                        return error.code
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0 == .io }, "\(outcomes)")
        failing.store(false, ordering: .releasing)
        await #expect(throws: StoreError.self) { try await store.write { try $0.setRecord(Record(value: Data("x".utf8)), forKey: "after") } }
        let blocking: @Sendable () throws -> Void = { try store.write { try $0.setRecord(Record(value: Data("y".utf8)), forKey: "after") } }
        #expect(throws: StoreError.self) { try blocking() }
        #expect(try await store.record(forKey: "before")?.value == Data("before".utf8))
        _ = try? await store.close()
    }
}

/// Holds a long operation at the first progress report `matches` accepts, until the test opens it.
private final class ProgressGate: Sendable {
    private let matches: @Sendable (MaintenanceProgress) -> Bool
    private let reached = Atomic<Bool>(false)
    private let opened = DispatchSemaphore(value: 0)

    init(_ matches: @escaping @Sendable (MaintenanceProgress) -> Bool) { self.matches = matches }

    var report: @Sendable (MaintenanceProgress) -> Void {
        { [self] progress in
            guard matches(progress), !reached.exchange(true, ordering: .acquiringAndReleasing) else { return }
            opened.wait()
        }
    }

    func waitUntilReached() async throws {
        while !reached.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(2)) }
    }

    func open() { opened.signal() }
}

/// A flag one thread sets and another reads.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
