import Foundation
import Synchronization
import Testing
@testable import ContentStore

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
}
