#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// ENOSPC and EIO injected at every open, write, sync, truncate, rename, unlink and mkdir of the core
    /// workloads, one fault per run.
    ///
    /// Each run checks that the caller got a typed error (`io`, caused by a ``SystemError`` with the
    /// injected `errno`); that nothing was acknowledged that a power cut right after the run would lose
    /// (a failed sync loses the file's unsynced writes in the model, so retrying the sync and trusting
    /// it — "fsyncgate" — is caught); and that once the fault clears, the store reopens to a committed
    /// prefix holding every acknowledged commit, verifies clean and takes new commits.
    ///
    /// `RELIABILITY_FAULT_STRIDE` faults every n-th call only (default 1: every call).
    @Suite("Reliability: I/O faults", .blocking)
    struct IOFaultTests {
        static let errnos: [Int32] = [ENOSPC, EIO]

        /// Calls the workload makes with no fault.
        func callCount(_ workload: CoreWorkload, in directory: URL) throws -> Int {
            let disk = directory.appendingPathComponent("count")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let io = PowerCutFileIO(root: disk)
            let runner = WorkloadRunner(storeURL: disk.appendingPathComponent("store"), fileIO: io, seed: 0xfa17)
            workload.run(runner)
            #expect(runner.errors.isEmpty)
            return io.callCount
        }

        @Test(arguments: CoreWorkload.allCases)
        func everyCallFailingWithENOSPCOrEIO(_ workload: CoreWorkload) async throws {
            let dir = ScratchDirectory()
            let calls = try callCount(workload, in: dir.url)
            let stride = max(1, environmentInteger("RELIABILITY_FAULT_STRIDE", default: 1))
            var injected = 0
            for index in Swift.stride(from: 0, to: calls, by: stride) {
                for errno in IOFaultTests.errnos {
                    let fault = PowerCutFileIO.Fault(index: index, errno: errno)
                    try run(workload, with: fault, in: dir.url.appendingPathComponent("run-\(index)-\(errno)"))
                    injected += 1
                    await Task.yield()  // a long sweep must not hold a thread async tests need
                }
            }
            ReliabilityReport.record("io-faults-\(workload)", ["calls": calls, "faultsInjected": injected, "stride": stride],
                                     summary: "I/O faults: \(workload): \(calls) calls, \(injected) faults injected (ENOSPC and EIO, every \(stride == 1 ? "" : "\(stride)th ")call)")
        }

        func run(_ workload: CoreWorkload, with fault: PowerCutFileIO.Fault, in directory: URL) throws {
            let label = "\(workload) with \(fault)"
            let disk = directory.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let io = PowerCutFileIO(root: disk, fault: fault)
            let runner = WorkloadRunner(storeURL: disk.appendingPathComponent("store"), fileIO: io, seed: 0xfa17)
            workload.run(runner)
            #expect(io.faultInjected, "\(label): the fault was not reached")

            // The caller learned of the fault, as a typed error naming the errno.
            guard let first = runner.errors.first else {
                Issue.record("\(label): no operation failed")
                return
            }
            let error = first as? StoreError
            #expect(error?.code == .io, "\(label): first error is \(first)")
            #expect((error?.cause as? SystemError)?.errno == fault.errno, "\(label): first error is \(first)")
            // A store whose log or pack sync failed acknowledges nothing more until it is reopened.
            #expect(runner.commitsAcknowledgedAfterAFailedLogSync == 0,
                    "\(label): \(runner.commitsAcknowledgedAfterAFailedLogSync) commits acknowledged after a failed log sync: \(runner.errors)")
            #expect(runner.putsAfterAFailedPackSync == 0, "\(label): \(runner.putsAfterAFailedPackSync) puts accepted after a failed pack sync: \(runner.errors)")

            // Nothing acknowledged is lost to a power cut right now (a failed sync lost its writes).
            var random = SeededRandom(seed: 0)
            let image = directory.appendingPathComponent("image")
            try io.writeImage(to: image, mode: .durableOnly, random: &random)
            checkRecoveredStore(at: image.appendingPathComponent("store"), candidates: runner.journal.candidates, "\(label), then a power cut")

            // The fault clears: the store reopens consistent and usable.
            checkRecoveredStore(at: disk.appendingPathComponent("store"), candidates: runner.journal.candidates, "\(label), reopened")
        }

        /// After a failed sync of the log, the store refuses every later change instead of
        /// acknowledging it; reads keep working; reopening recovers.
        @Test(arguments: IOFaultTests.errnos)
        func afterAFailedLogSyncTheStoreRefusesChangesUntilReopened(errno: Int32) throws {
            let dir = TemporaryDirectory()
            let configuration = Store.Configuration()
            let syncs = Mutex(0)
            let failAt = Mutex<Int?>(nil)
            var seams = Store.Seams()
            seams.fileIO = ScriptedFileIO { call, path in
                guard call == .sync, path.contains("/wal/") else { return nil }
                return syncs.withLock { count in
                    defer { count += 1 }
                    return failAt.withLock { $0 } == count ? errno : nil
                }
            }
            let store = try Store(at: dir.store, configuration: configuration, seams: seams)
            let kept = try store.put(Data("kept".utf8))
            try store.write { try $0.setRecord(Record(value: Data("1".utf8), references: [kept]), forKey: "a") }
            failAt.withLock { $0 = syncs.withLock { $0 } }

            let failed = #expect(throws: StoreError.self) { try store.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "b") } }
            #expect(failed?.code == .io)
            #expect((failed?.cause as? SystemError)?.errno == errno)
            // The log is failed for good: nothing more is acknowledged, even though syncs work again.
            #expect(throws: StoreError.self) { try store.write { try $0.setRecord(Record(value: Data("3".utf8)), forKey: "c") } }
            #expect(throws: StoreError.self) { try store.put(Data("new".utf8)) }
            #expect(throws: StoreError.self) { try store.checkpoint() }
            #expect(throws: StoreError.self) { try store.collectGarbage() }
            // Reads still work and never show the failed commit.
            #expect(try store.record(forKey: "a") == Record(value: Data("1".utf8), references: [kept]))
            #expect(try store.record(forKey: "b") == nil)
            #expect(try store.get(kept) == Data("kept".utf8))
            _ = try? store.close()

            let reopened = try Store(at: dir.store)
            #expect(try reopened.record(forKey: "a") == Record(value: Data("1".utf8), references: [kept]))
            #expect(try reopened.record(forKey: "c") == nil)
            try reopened.write { try $0.setRecord(Record(value: Data("4".utf8)), forKey: "d") }
            #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
            try reopened.close()
        }

        /// A full disk while writing a blob fails that put only: once space returns, the same store
        /// (no reopen) puts and commits again. Small puts wait in memory (the deferred pack write), so
        /// the writes are the new pack's header, then the deferred bytes written to make room once 64
        /// KiB of them wait, then the puts that follow (their uncommitted bytes pass what a commit
        /// carries from memory): each is some put's, which fails alone.
        @Test(arguments: [0, 1, 2, 3])
        func aFullDiskDuringAPutFailsThatPutOnly(packWrite: Int) throws {
            let dir = TemporaryDirectory()
            let writes = Mutex(0)
            let configuration = Store.Configuration()
            var seams = Store.Seams()
            seams.fileIO = ScriptedFileIO { call, path in
                guard call == .write, path.contains("/packs/") else { return nil }
                return writes.withLock { count in
                    defer { count += 1 }
                    return count == packWrite ? ENOSPC : nil
                }
            }
            let store = try Store(at: dir.store, configuration: configuration, seams: seams)
            var random = SeededRandom(seed: 9)
            var references: [Digest] = []
            var failures = 0
            for _ in 0 ..< 30 {
                do {
                    references.append(try store.put(random.bytes(3000)))
                } catch let error as StoreError {
                    #expect(error.code == .io)
                    #expect((error.cause as? SystemError)?.isNoSpace == true)
                    failures += 1
                }
            }
            #expect(failures == 1)
            try store.write { try $0.setRecord(Record(value: Data(), references: references), forKey: "k") }
            try store.close()
            let reopened = try Store(at: dir.store)
            #expect(try reopened.record(forKey: "k")?.references == references)
            #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
            try reopened.close()
        }
    }
}

/// The real system calls, with a closure that may fail any mutating call with an `errno` (it sees
/// the call and the path; for writes and syncs the path of the descriptor).
final class ScriptedFileIO: FileIO, Sendable {
    typealias Call = PowerCutFileIO.Call
    private let base = SystemFileIO()
    private let paths = Mutex<[Int32: String]>([:])
    private let decide: @Sendable (Call, String) -> Int32?

    init(_ decide: @escaping @Sendable (Call, String) -> Int32?) { self.decide = decide }

    private func path(_ descriptor: Int32) -> String { paths.withLock { $0[descriptor] ?? "" } }

    private func check(_ call: Call, _ path: String) -> SystemError? {
        decide(call, path).map { SystemError(call.rawValue, errno: $0) }
    }

    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError> {
        if let error = check(.open, path) { return .failure(error) }
        let result = base.open(path, flags: flags, mode: mode)
        if case .success(let descriptor) = result { paths.withLock { $0[descriptor] = path } }
        return result
    }
    func close(_ descriptor: Int32) {
        paths.withLock { _ = $0.removeValue(forKey: descriptor) }
        base.close(descriptor)
    }
    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        base.pread(descriptor, into: buffer, at: offset)
    }
    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        if let error = check(.write, path(descriptor)) { return .failure(error) }
        return base.pwrite(descriptor, from: buffer, at: offset)
    }
    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError> {
        if let error = check(.sync, path(descriptor)) { return .failure(error) }
        return base.fdatasync(descriptor)
    }
    func fsync(_ descriptor: Int32) -> Result<Void, SystemError> {
        if let error = check(.sync, path(descriptor)) { return .failure(error) }
        return base.fsync(descriptor)
    }
    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError> {
        if let error = check(.truncate, path(descriptor)) { return .failure(error) }
        return base.ftruncate(descriptor, length: length)
    }
    func size(_ descriptor: Int32) -> Result<UInt64, SystemError> { base.size(descriptor) }
    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError> { base.lockExclusively(descriptor) }
    func rename(_ source: String, to destination: String) -> Result<Void, SystemError> {
        if let error = check(.rename, source) { return .failure(error) }
        return base.rename(source, to: destination)
    }
    func unlink(_ path: String) -> Result<Void, SystemError> {
        if let error = check(.unlink, path) { return .failure(error) }
        return base.unlink(path)
    }
    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError> {
        if let error = check(.mkdir, path) { return .failure(error) }
        return base.mkdir(path, mode: mode)
    }
    func contents(ofDirectory path: String) -> Result<[String], SystemError> { base.contents(ofDirectory: path) }
    func kind(of path: String) -> FileKind { base.kind(of: path) }
}
