#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// A small put's pack bytes wait in memory (``PackStore/State/deferred``) and reach the file in one
/// `pwrite` for many puts (Docs/durability.md, "The deferred pack write"). Every reader sees them,
/// every commit relying on them makes them durable, a write of them that fails is never silent.
@Suite("Deferred pack write", .blocking)
struct DeferredPackWriteTests {
    static func deferredCount(_ store: Store) -> Int {
        store.packs.state.withLock { $0.deferred?.bytes.count ?? 0 }
    }

    /// The bytes of the store's pack files on disk.
    static func packBytesOnDisk(_ store: URL) throws -> UInt64 {
        try files(in: store.appendingPathComponent("packs"), withExtension: "pack").reduce(0) {
            $0 + ((try FileManager.default.attributesOfItem(atPath: $1.path)[.size] as? NSNumber)?.uint64Value ?? 0)
        }
    }

    @Test func aSmallPutIsKeptInMemoryAndManyGoOutInOneWrite() throws {
        let dir = TemporaryDirectory()
        let writes = Mutex(0)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            if call == .write, path.contains("/packs/") { writes.withLock { $0 += 1 } }
            return nil
        }
        let store = try Store(at: dir.store, configuration: .testing(durability: .full), seams: seams)
        var random = SeededRandom(seed: 0xdef)
        _ = try store.put(random.bytes(3000))
        let afterFirst = writes.withLock { $0 }  // the new pack's header
        #expect(Self.deferredCount(store) == PackFormat.entryHeaderSize + 3000)
        for index in 0 ..< 40 {
            let digest = try store.put(random.bytes(3000))
            try store.write { try $0.setRecord(Record(value: Data(), references: [digest]), forKey: "k\(index)") }
        }
        // 41 entries of 3,056 bytes in 64 KiB steps: one write per 21 puts, none for the commits
        // (each carries its put's bytes from memory).
        #expect(writes.withLock { $0 } - afterFirst == 1)
        #expect(Self.deferredCount(store) > 0)
        try store.close()
        #expect(writes.withLock { $0 } - afterFirst == 2)
        let reopened = try Store(at: dir.store)
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// Each way the store reads a pack, run while the bytes it reads are deferred.
    enum Reader: String, CaseIterable, CustomTestStringConvertible {
        case get, getWithoutCache, getTwice, getAsync, chunked, export, exportAsync, verify, verifyReadingData, statistics
        var testDescription: String { rawValue }
    }

    @Test(arguments: Reader.allCases)
    func everyReaderSeesDeferredBytes(_ reader: Reader) async throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing(durability: .full)
        if reader == .getWithoutCache { configuration.readCacheSize = 0 }
        configuration.chunkingThreshold = 128 << 10
        let store = try Store(at: dir.store, configuration: configuration)
        let blobs = try Self.putAndCommit(chunked: reader == .chunked, store)
        #expect(Self.deferredCount(store) > 0)
        if reader != .chunked { #expect(try Self.packBytesOnDisk(dir.store) == UInt64(PackFormat.headerSize)) }
        switch reader {
        case .getAsync:
            for (digest, data) in blobs { #expect(try await store.get(digest) == data) }
        case .exportAsync:
            for (index, (digest, data)) in blobs.enumerated() {
                let url = dir.url.appendingPathComponent("export\(index)")
                try await store.export(digest, to: url)
                #expect(try Data(contentsOf: url) == data)
            }
        default:
            try Self.read(reader, blobs, store, in: dir)
        }
        if reader != .statistics { #expect(Self.deferredCount(store) == 0) }
        try await store.close()
    }

    /// Small blobs (or one chunked into small entries) referenced by a durable commit.
    static func putAndCommit(chunked: Bool, _ store: Store) throws -> [(Digest, Data)] {
        var random = SeededRandom(seed: 0x5ee)
        var blobs: [(Digest, Data)] = []
        if chunked {
            let data = random.compressibleBytes(256 << 10)
            blobs = [(try store.put(data), data)]
        } else {
            for index in 0 ..< 6 {
                let data = index % 2 == 0 ? random.bytes(700 + 900 * index) : random.compressibleBytes(4000)
                blobs.append((try store.put(data), data))
            }
        }
        let references = blobs.map(\.0)
        try store.write { try $0.setRecord(Record(value: Data(), references: references), forKey: "k") }
        return blobs
    }

    static func read(_ reader: Reader, _ blobs: [(Digest, Data)], _ store: Store, in dir: TemporaryDirectory) throws {
        switch reader {
        case .get, .getWithoutCache, .chunked:
            for (digest, data) in blobs { #expect(try store.get(digest) == data) }
        case .getTwice:
            for (digest, data) in blobs { #expect(try store.get(digest) == data) }
            for (digest, data) in blobs { #expect(try store.get(digest) == data) }
        case .export:
            for (index, (digest, data)) in blobs.enumerated() {
                let url = dir.url.appendingPathComponent("export\(index)")
                try store.export(digest, to: url)
                #expect(try Data(contentsOf: url) == data)
            }
        case .verify, .verifyReadingData:
            let report = try store.verify(VerificationOptions(readData: reader == .verifyReadingData))
            #expect(report.isClean, "\(report.problems)")
        case .statistics:
            let statistics = try store.statistics()
            #expect(statistics.blobCount == blobs.count)
            #expect(statistics.storedBytes == store.packs.totalBytes)
        case .getAsync, .exportAsync:
            Issue.record("read asynchronously by the test")
        }
    }

    /// Collection copies the live blobs of mostly dead packs into the active pack, where they are
    /// deferred like any small put; a power cut right after keeps every live blob.
    @Test func collectionCopiesIntoDeferredBytesAndAPowerCutKeepsThem() throws {
        let dir = TemporaryDirectory()
        let io = PowerCutFileIO(root: dir.url)
        let clock = TestClock()
        var configuration = Store.Configuration.testing(durability: .full, clock: clock)
        configuration.packSizeTarget = 64 << 10
        var seams = Store.Seams()
        seams.fileIO = io
        let store = try Store(at: dir.store, configuration: configuration, seams: seams)
        var random = SeededRandom(seed: 0x9c)
        var live: [(Digest, Data)] = []
        var dead: [Digest] = []
        for index in 0 ..< 40 {
            let data = random.bytes(3000)
            let digest = try store.put(data)
            if index % 5 == 0 { live.append((digest, data)) } else { dead.append(digest) }
        }
        try store.write { try $0.setRecord(Record(value: Data(), references: live.map(\.0)), forKey: "live") }
        clock.advance(by: 7200)
        let report = try store.collectGarbage()
        #expect(report.packsRewritten > 0)
        #expect(Self.deferredCount(store) > 0)
        for (digest, data) in live { #expect(try store.get(digest) == data) }

        var cut = SeededRandom(seed: 2)
        let image = dir.url.appendingPathComponent("image")
        try io.writeImage(to: image, mode: .durableOnly, random: &cut)
        let recovered = try Store(at: image.appendingPathComponent("store"))
        for (digest, data) in live { #expect(try recovered.get(digest) == data) }
        for digest in dead { #expect(!recovered.contains(digest)) }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    /// A checkpoint writes and syncs the deferred bytes before it lets the segments that carried
    /// them go; a power cut after it (the log no longer carrying them) keeps every committed blob.
    @Test func aCheckpointWritesDeferredBytesBeforeTheLogDropsThem() throws {
        let dir = TemporaryDirectory()
        let io = PowerCutFileIO(root: dir.url)
        var seams = Store.Seams()
        seams.fileIO = io
        let store = try Store(at: dir.store, configuration: .testing(durability: .full), seams: seams)
        var random = SeededRandom(seed: 0xcc)
        var committed: [(Digest, Data)] = []
        for index in 0 ..< 5 {
            let data = random.compressibleBytes(2000 + 100 * index)
            let digest = try store.put(data)
            try store.write { try $0.setRecord(Record(value: Data(), references: [digest]), forKey: "k\(index)") }
            committed.append((digest, data))
        }
        #expect(Self.deferredCount(store) > 0)
        try store.checkpoint()
        #expect(Self.deferredCount(store) == 0)
        var cut = SeededRandom(seed: 3)
        let image = dir.url.appendingPathComponent("image")
        try io.writeImage(to: image, mode: .durableOnly, random: &cut)
        let recovered = try Store(at: image.appendingPathComponent("store"))
        for (digest, data) in committed { #expect(try recovered.get(digest) == data) }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    /// A commit that is written but not synced (``Store/Durability/none``) writes the deferred bytes
    /// first: a process killed after it leaves in the pack file what its records refer to.
    @Test func aCommitWithoutSyncWritesTheDeferredBytes() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: .none))
        let data = Data(repeating: 7, count: 5000)
        let digest = try store.put(data)
        #expect(Self.deferredCount(store) > 0)
        try store.write { try $0.setRecord(Record(value: Data(), references: [digest]), forKey: "k") }
        #expect(Self.deferredCount(store) == 0)
        #expect(try Self.packBytesOnDisk(dir.store) > UInt64(PackFormat.headerSize))
        try store.close()
    }

    /// A write of the deferred bytes that fails is thrown to the operation that needed it, keeps the
    /// bytes, and is retried: once the fault clears, the same store reads, commits and closes, and
    /// every acknowledged blob is there after reopening.
    @Test(arguments: [ENOSPC, EIO])
    func aFailedDeferredWriteIsThrownAndRetried(errno: Int32) throws {
        let dir = TemporaryDirectory()
        let failing = Mutex(false)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            call == .write && path.contains("/packs/") && failing.withLock { $0 } ? errno : nil
        }
        let store = try Store(at: dir.store, configuration: .testing(durability: .full), seams: seams)
        var random = SeededRandom(seed: 0xfa)
        let first = random.bytes(3000)
        let digest = try store.put(first)
        try store.write { try $0.setRecord(Record(value: Data([1]), references: [digest]), forKey: "a") }

        failing.withLock { $0 = true }
        let error = #expect(throws: StoreError.self) { try store.get(digest) }
        #expect(error?.code == .io)
        #expect((error?.cause as? SystemError)?.errno == errno)
        // A put that needs the deferred bytes written to make room fails too, and changes nothing.
        var failedPuts = 0
        var kept: [(Digest, Data)] = [(digest, first)]
        for _ in 0 ..< 30 {
            let data = random.bytes(3000)
            do {
                kept.append((try store.put(data), data))
            } catch let error as StoreError {
                #expect((error.cause as? SystemError)?.errno == errno)
                failedPuts += 1
            }
        }
        #expect(failedPuts > 0)
        // Committing what was put needs no pack write: the batch carries the bytes.
        try store.write { try $0.setRecord(Record(value: Data([2]), references: kept.map(\.0)), forKey: "b") }

        failing.withLock { $0 = false }
        for (digest, data) in kept { #expect(try store.get(digest) == data) }
        try store.close()
        let reopened = try Store(at: dir.store)
        for (digest, data) in kept { #expect(try reopened.get(digest) == data) }
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// While the deferred bytes cannot be written, a checkpoint fails rather than drop the log that
    /// carries them; a store closed then, and reopened, has every acknowledged commit from the log.
    @Test func aCheckpointThatCannotWriteTheDeferredBytesKeepsTheLog() throws {
        let dir = TemporaryDirectory()
        let failing = Mutex(false)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            call == .write && path.contains("/packs/") && failing.withLock { $0 } ? EIO : nil
        }
        let store = try Store(at: dir.store, configuration: .testing(durability: .full), seams: seams)
        var random = SeededRandom(seed: 0xcf)
        var committed: [(Digest, Data)] = []
        for index in 0 ..< 4 {
            let data = random.bytes(2500)
            let digest = try store.put(data)
            try store.write { try $0.setRecord(Record(value: Data(), references: [digest]), forKey: "k\(index)") }
            committed.append((digest, data))
        }
        failing.withLock { $0 = true }
        #expect(throws: StoreError.self) { try store.checkpoint() }
        _ = try? store.close()
        failing.withLock { $0 = false }
        #expect(try Self.packBytesOnDisk(dir.store) == UInt64(PackFormat.headerSize))

        let reopened = try Store(at: dir.store)
        for (digest, data) in committed { #expect(try reopened.get(digest) == data) }
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// A process killed with SIGKILL after its commits were acknowledged and before their pack bytes
    /// were written (Tests/CrashWorkload with `--hold`): the reopened store holds every commit,
    /// recovery having written the bytes the log carried into the pack files.
    @Test func aProcessKilledAfterTheAcknowledgementBeforeThePackWriteLosesNothing() async throws {
        let executable = try #require(Reliability.ProcessCrashTests.executable, "CrashWorkload was not found beside the tests")
        let dir = TemporaryDirectory()
        let output = dir.url.appendingPathComponent("out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = executable
        process.arguments = [dir.store.path, "7", "0", "--threads", "1", "--durability", "full", "--transactions", "6", "--hold"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(120)
        var text = ""
        while !text.contains("\nH "), process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            text = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let held = try #require(text.split(separator: "\n").last { $0.hasPrefix("H ") }.flatMap { Digest(hex: String($0.dropFirst(2))) },
                                "the workload did not finish its transactions: \(text)")
        let (transactions, acknowledged, failures) = try Reliability.ProcessCrashTests.parse(text.components(separatedBy: "\nH ")[0] + "\n")
        #expect(failures.isEmpty)
        #expect(acknowledged.count == 6)

        let onDisk = try Self.packBytesOnDisk(dir.store)
        let reopened = try Store(at: dir.store)
        // Recovery wrote bytes the process had acknowledged but never written.
        #expect(try Self.packBytesOnDisk(dir.store) > onDisk)
        var expected: Journal.State = [:]
        for transaction in transactions.sorted(by: { $0.counter < $1.counter }) { expected = Journal.applying(transaction.changes, to: expected) }
        expected["held"] = Record(value: Data("held".utf8), references: [held])
        #expect(try await reopened.get(held) == Data("held 0".utf8) + Data(repeating: UInt8(ascii: "h"), count: 3000))
        #expect(try allRecords(reopened) == expected)
        #expect(try await reopened.verify(VerificationOptions(readData: true)).isClean)
        try await reopened.close()
    }
}
