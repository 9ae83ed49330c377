#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// `close` checkpoints a long log (LocalEngine.checkpointBeforeClosing), so the next open replays
/// little; a short log is left for replay; a fault or power cut during that checkpoint loses nothing.
@Suite(.blocking) struct CloseCheckpointTests {
    /// Closing checkpoints from 64 KiB of log on.
    static func configuration() -> Store.Configuration {
        var configuration = Store.Configuration.testing(durability: .full)
        configuration.checkpointThreshold = 1 << 20
        configuration.controlSocket = false
        return configuration
    }

    static func records(_ count: Int) -> [String: Record] {
        Dictionary(uniqueKeysWithValues: (0 ..< count).map { ("key \($0)", Record(value: Data(repeating: UInt8($0 % 251), count: 300))) })
    }

    static func write(_ records: [String: Record], to store: Store) throws {
        let sorted = records.sorted(by: { $0.key < $1.key })
        for start in stride(from: 0, to: sorted.count, by: 10) {
            try store.write { transaction in
                for (key, record) in sorted[start ..< min(start + 10, sorted.count)] { try transaction.setRecord(record, forKey: key) }
            }
        }
    }

    static func checkpoints(in store: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: store.appendingPathComponent("checkpoint").path).filter { $0.hasSuffix(".ckpt") }
    }

    @Test func aLongLogIsCheckpointedAtClose() throws {
        let dir = TemporaryDirectory()
        let expected = Self.records(400)  // about 150 KB of log
        do {
            let store = try Store(at: dir.store, configuration: Self.configuration())
            try Self.write(expected, to: store)
            #expect(try Self.checkpoints(in: dir.store).isEmpty)
            try store.close()
        }
        #expect(try Self.checkpoints(in: dir.store).count == 1)
        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        #expect(reopened.wal.bytesSinceCheckpoint.load(ordering: .relaxed) < 1024, "the next open replays nothing")
        for (key, record) in expected { #expect(try reopened.record(forKey: key) == record) }
        try reopened.close()
    }

    @Test func aShortLogIsLeftForReplay() throws {
        let dir = TemporaryDirectory()
        let expected = Self.records(20)
        do {
            let store = try Store(at: dir.store, configuration: Self.configuration())
            try Self.write(expected, to: store)
            try store.close()
        }
        #expect(try Self.checkpoints(in: dir.store).isEmpty)
        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        for (key, record) in expected { #expect(try reopened.record(forKey: key) == record) }
        try reopened.close()
    }

    /// ENOSPC at each system call of the close (its checkpoint, then the log's trim), then a power
    /// cut keeping only what was synced: every acknowledged commit is there, and the store verifies.
    @Test func aFaultOrPowerCutDuringTheCloseCheckpointLosesNothing() throws {
        let dir = TemporaryDirectory()
        let expected = Self.records(400)
        func run(fault: PowerCutFileIO.Fault?, in disk: URL) throws -> (io: PowerCutFileIO, callsBeforeClose: Int) {
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let io = PowerCutFileIO(root: disk, fault: fault)
            var seams = Store.Seams()
            seams.fileIO = io
            let store = try Store(at: disk.appendingPathComponent("store"), configuration: Self.configuration(), seams: seams)
            try Self.write(expected, to: store)
            let callsBeforeClose = io.callCount
            try? store.close()
            return (io, callsBeforeClose)
        }
        let clean = try run(fault: nil, in: dir.url.appendingPathComponent("clean"))
        let closeCalls = clean.io.callCount - clean.callsBeforeClose
        #expect(closeCalls > 5, "the close writes a checkpoint")
        for index in clean.callsBeforeClose ..< clean.io.callCount {
            let disk = dir.url.appendingPathComponent("fault-\(index)")
            let (io, _) = try run(fault: PowerCutFileIO.Fault(index: index, errno: ENOSPC), in: disk)
            var random = SeededRandom(seed: UInt64(index))
            let image = dir.url.appendingPathComponent("image-\(index)")
            try io.writeImage(to: image, mode: .durableOnly, random: &random)
            let store = try Store(at: image.appendingPathComponent("store"), configuration: Self.configuration())
            for (key, record) in expected { #expect(try store.record(forKey: key) == record, "fault at call \(index)") }
            #expect(try store.verify().isClean, "fault at call \(index)")
            try store.close()
            try? FileManager.default.removeItem(at: disk)
            try? FileManager.default.removeItem(at: image)
        }
    }
}
