import Foundation
import Synchronization
import Testing
@testable import ContentStore

extension Reliability {
    /// One test per engine defect the reliability campaign found (Docs/reliability.md lists them).
    @Suite("Reliability: engine regressions")
    struct EngineRegressionTests {
        /// Defect: the store directory's own entry was never synced in its parent, so a power cut after
        /// acknowledged commits to a newly created store could take the whole store.
        @Test func aNewStoreDirectoryIsDurableInItsParent() throws {
            let dir = TemporaryDirectory()
            let io = PowerCutFileIO(root: dir.url)
            var configuration = Store.Configuration()
            configuration.fileIO = io
            let url = dir.url.appendingPathComponent("a/b/store")
            let store = try Store(at: url, configuration: configuration)
            try store.write { try $0.setRecord(Record(value: Data("v".utf8)), forKey: "k") }
            var random = SeededRandom(seed: 0)
            let image = dir.url.appendingPathComponent("image")
            try io.writeImage(to: image, mode: .durableOnly, random: &random)
            try store.close()
            let recovered = try Store(at: image.appendingPathComponent("a/b/store"))
            #expect(try recovered.record(forKey: "k") == Record(value: Data("v".utf8)))
        }

        /// Defect: creation made `wal/`, `packs/` and `checkpoint/` before FORMAT, so a crash between the
        /// two left a directory that every later open refused ("holds files but no FORMAT").
        @Test func aPowerCutAtAnySyncWhileCreatingAStoreLeavesADirectoryThatOpens() throws {
            let dir = TemporaryDirectory()
            let disk = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let images = Mutex<[URL]>([])
            let base = dir.url
            let io = PowerCutFileIO(root: disk) { disk, index in
                for mode in PowerCutFileIO.ImageMode.allCases {
                    var random = SeededRandom(seed: UInt64(index))
                    let url = base.appendingPathComponent("image-\(index)-\(mode)")
                    if (try? disk.writeImage(to: url, mode: mode, random: &random)) != nil { images.withLock { $0.append(url) } }
                }
            }
            var configuration = Store.Configuration()
            configuration.fileIO = io
            try Store(at: disk.appendingPathComponent("store"), configuration: configuration).close()
            #expect(images.withLock { $0.count } >= 6)
            for image in images.withLock({ $0 }) {
                #expect(throws: Never.self, "\(image.lastPathComponent)") { try Store(at: image.appendingPathComponent("store")).close() }
            }
        }

        @Test func aDirectoryLeftWithOnlyLockAndAnUnfinishedFormatOpensAsANewStore() throws {
            let dir = TemporaryDirectory()
            try FileManager.default.createDirectory(at: dir.store, withIntermediateDirectories: true)
            try Data().write(to: dir.store.appendingPathComponent("LOCK"))
            try Data("CST".utf8).write(to: dir.store.appendingPathComponent("FORMAT.tmp"))
            let store = try Store(at: dir.store)
            try store.write { try $0.setRecord(Record(), forKey: "k") }
            try store.close()
            #expect(try Store(at: dir.store).record(forKey: "k") == Record())
        }

        // MARK: Failed syncs ("fsyncgate")

        /// A store on a ``PowerCutFileIO`` with one fault; `body` runs against it, then the test takes
        /// the durable-only image (a power cut now) and returns its store directory.
        func withFault(_ fault: PowerCutFileIO.Fault, in dir: ScratchDirectory,
                       configure: (inout Store.Configuration) -> Void = { _ in },
                       _ body: (_ open: () throws -> Store) throws -> Void) throws -> URL {
            let disk = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let io = PowerCutFileIO(root: disk, fault: fault)
            var configuration = Store.Configuration()
            configuration.fileIO = io
            configuration.packSizeTarget = 64 * 1024
            configure(&configuration)
            try body { try Store(at: disk.appendingPathComponent("store"), configuration: configuration) }
            #expect(io.faultInjected)
            var random = SeededRandom(seed: 0)
            let image = dir.url.appendingPathComponent("image")
            try io.writeImage(to: image, mode: .durableOnly, random: &random)
            return image.appendingPathComponent("store")
        }

        /// Defect: after a failed sync of the log, reopening replayed the batch from the page cache and
        /// synced the segment, which wrote nothing (the kernel had marked those pages clean). The next
        /// batches' sync points vouched for bytes the disk never got: after a power cut the store
        /// refused to open ("WAL record fails its checksum"). Recovery now rewrites the bytes after the
        /// last sync point's claim before syncing.
        @Test func reopeningAfterAFailedLogSyncMakesTheReplayedTailDurable() throws {
            let dir = ScratchDirectory()
            // Sync 0 of the segment is its header's, sync 1 the first commit's: the second commit fails.
            let fault = PowerCutFileIO.Fault(index: 2, errno: EIO, calls: [.sync], path: "/wal/0000000000000001.log")
            let image = try withFault(fault, in: dir) { open in
                let store = try open()
                try store.write { try $0.setRecord(Record(value: Data("1".utf8)), forKey: "a") }
                #expect(throws: StoreError.self) { try store.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "b") } }
                _ = try? store.close()
                let reopened = try open()
                #expect(try reopened.record(forKey: "b") == Record(value: Data("2".utf8)))  // the page cache had it
                try reopened.write { try $0.setRecord(Record(value: Data("3".utf8)), forKey: "c") }
                try reopened.close()
            }
            let store = try Store(at: image)
            #expect(try store.record(forKey: "a") == Record(value: Data("1".utf8)))
            #expect(try store.record(forKey: "b") == Record(value: Data("2".utf8)))
            #expect(try store.record(forKey: "c") == Record(value: Data("3".utf8)))
            try store.close()
        }

        /// Defect: a failed sync while sealing a pack was not remembered; the next sync of that pack
        /// succeeded (the pages were already marked clean) and a commit referencing a blob in it was
        /// acknowledged although the blob's bytes never reached the disk. The pack store now fails
        /// for good, like the log.
        @Test func aFailedSyncWhileSealingAPackFailsTheCommitsThatNeedIt() throws {
            let dir = ScratchDirectory()
            let fault = PowerCutFileIO.Fault(index: 0, errno: EIO, calls: [.sync], path: "/packs/00000001.pack")
            var acknowledged: Digest?
            let image = try withFault(fault, in: dir) { open in
                let store = try open()
                var random = SeededRandom(seed: 3)
                var digests: [Digest] = []
                // No commits: nothing syncs pack 1 until it is sealed, when the 11th blob does not fit.
                for _ in 0 ..< 10 { digests.append(try store.put(random.bytes(6000))) }
                #expect(throws: StoreError.self) { try store.put(random.bytes(6000)) }
                do {
                    try store.write { try $0.setRecord(Record(value: Data(), references: [digests[0]]), forKey: "k") }
                    acknowledged = digests[0]
                } catch {
                    #expect((error as? StoreError)?.code == .io)
                }
                _ = try? store.close()
            }
            #expect(acknowledged == nil, "a commit needing a pack whose sync failed was acknowledged")
            let store = try Store(at: image)
            if let acknowledged {
                #expect(throws: Never.self) { try store.get(acknowledged) }
            }
            #expect(try store.verify(VerificationOptions(readData: true)).isClean)
            try store.close()
        }

        /// Defect: a checkpoint whose new WAL segment could not be created left the log running, so
        /// later commits went to a segment that was no longer the last one on disk, where a crash's
        /// torn tail reads as damage and the store refuses to open. The log now fails, as after any
        /// failed write or sync.
        @Test(arguments: [PowerCutFileIO.Call.open, .write, .sync])
        func aCheckpointThatCannotStartTheNextSegmentFailsTheLog(_ call: PowerCutFileIO.Call) throws {
            let dir = ScratchDirectory()
            let fault = PowerCutFileIO.Fault(index: 0, errno: ENOSPC, calls: [call], path: "/wal/0000000000000002.log")
            let image = try withFault(fault, in: dir) { open in
                let store = try open()
                try store.write { try $0.setRecord(Record(value: Data("1".utf8)), forKey: "a") }
                #expect(throws: StoreError.self) { try store.checkpoint() }
                #expect(throws: StoreError.self) { try store.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "b") } }
                _ = try? store.close()
                let reopened = try open()
                try reopened.write { try $0.setRecord(Record(value: Data("3".utf8)), forKey: "c") }
                try reopened.checkpoint()
                try reopened.close()
            }
            let store = try Store(at: image)
            #expect(try allRecords(store) == ["a": Record(value: Data("1".utf8)), "c": Record(value: Data("3".utf8))])
            try store.close()
        }

        /// Defect: after an open failed to sync a directory (the store root after making `wal/`,
        /// `packs/`, `checkpoint/`; `wal/` after making the first segment; the parent after making the
        /// store), the next open found everything in place and synced nothing, so its acknowledged
        /// commits could vanish with the unsynced entries in a power cut. Opening now syncs them.
        /// (directory, which of its syncs fails): the root's first sync is FORMAT's, its second the subdirectories'.
        @Test(arguments: [("/disk", 0), ("/disk/store", 1), ("/disk/store/wal", 0)])
        func anOpenThatFailedToSyncADirectoryIsRepairedByTheNextOpen(_ directory: String, sync: Int) throws {
            let dir = ScratchDirectory()
            let path = dir.url.path + directory
            let fault = PowerCutFileIO.Fault(index: sync, errno: EIO, calls: [.sync], path: path)
            let image = try withFault(fault, in: dir) { open in
                #expect(throws: StoreError.self) { try open() }
                let store = try open()
                try store.write { try $0.setRecord(Record(value: Data("1".utf8)), forKey: "a") }
                try store.close()
            }
            let store = try Store(at: image)
            #expect(try store.record(forKey: "a") == Record(value: Data("1".utf8)))
            try store.close()
        }

        /// Defect (with the syncs above): a checkpoint whose directory sync failed left its name
        /// unsynced; the next open deleted the segments it replaces and synced `wal/`, so a power cut
        /// could leave neither. Opening now syncs `checkpoint/` before deleting what it replaces.
        @Test func aCheckpointWhoseDirectorySyncFailedIsDurableBeforeTheSegmentsItReplacesGo() throws {
            let dir = ScratchDirectory()
            let fault = PowerCutFileIO.Fault(index: 0, errno: EIO, calls: [.sync], path: "/disk/store/checkpoint")
            let image = try withFault(fault, in: dir) { open in
                let store = try open()
                try store.write { try $0.setRecord(Record(value: Data("1".utf8)), forKey: "a") }
                #expect(throws: StoreError.self) { try store.checkpoint() }
                try store.close()
                let reopened = try open()
                try reopened.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "b") }
                try reopened.close()
            }
            let store = try Store(at: image)
            #expect(try allRecords(store) == ["a": Record(value: Data("1".utf8)), "b": Record(value: Data("2".utf8))])
            try store.close()
        }

        /// Defect: after the log failed while logging a collection's drop, the next collection found
        /// nothing to drop (the drop was applied in memory) and deleted the pack those blobs live in,
        /// although the drop never reached the log: reopened, the index pointed into a missing pack.
        /// Collection now makes the state durable (or fails) before deleting any pack.
        @Test func collectionDeletesNoPackOnTheStrengthOfAChangeThatFailedToReachTheLog() throws {
            let dir = TemporaryDirectory()
            let clock = TestClock()
            let failing = Mutex(false)
            var configuration = Store.Configuration()
            configuration.packSizeTarget = 64 * 1024
            configuration.now = { clock.now }
            configuration.fileIO = ScriptedFileIO { call, path in
                call == .write && path.contains("/wal/") && failing.withLock { $0 } ? EIO : nil
            }
            let store = try Store(at: dir.store, configuration: configuration)
            var random = SeededRandom(seed: 4)
            for _ in 0 ..< 14 { try store.put(random.bytes(6000)) }  // pack 1 sealed, all garbage
            try store.close()
            let reopened = try Store(at: dir.store, configuration: configuration)
            clock.advance(by: 7200)
            failing.withLock { $0 = true }
            #expect(throws: StoreError.self) { try reopened.collectGarbage() }
            failing.withLock { $0 = false }
            #expect(throws: StoreError.self) { try reopened.collectGarbage() }
            _ = try? reopened.close()
            let again = try Store(at: dir.store)
            #expect(try again.verify(VerificationOptions(readData: true)).isClean)
            try again.close()
        }
    }
}
