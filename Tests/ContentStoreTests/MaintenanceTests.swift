import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Statistics and verification: what they count, what damage they find, how they report it.
@Suite(.blocking) struct MaintenanceTests {
    @Test func statisticsCountDeduplicationAndCompression() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 7)
        let text = random.compressibleBytes(100_000)
        let shared = try store.put(text)
        try store.write { transaction in
            for key in ["a", "b", "c"] { try transaction.setRecord(Record(references: [shared]), forKey: key) }
        }
        let garbage = try store.put(random.bytes(1000))

        let statistics = try store.statistics()
        #expect(statistics.blobCount == 2)
        #expect(statistics.recordCount == 3)
        #expect(statistics.logicalBytes == 101_000)
        #expect(statistics.unreferencedBlobCount == 1)
        #expect(statistics.unreferencedLogicalBytes == 1000)
        #expect(statistics.referencedBytes == 300_000)
        #expect(statistics.deduplicationRatio == 3)
        #expect(statistics.compressionRatio > 2)
        #expect(statistics.packCount == 1)
        #expect(statistics.storedBytes >= statistics.liveStoredBytes)
        #expect(statistics.walBytes > 0)

        let json = try JSONEncoder().encode(statistics)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        for key in ["blobCount", "logicalBytes", "storedBytes", "recordCount", "walBytes", "packCount",
                    "compressionRatio", "deduplicationRatio", "unreferencedBlobCount", "deadStoredBytes"] {
            #expect(object[key] != nil, "\(key) in JSON")
        }
        #expect(try JSONDecoder().decode(Statistics.self, from: json) == statistics)

        _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(!store.contains(garbage))
        #expect(try store.statistics().unreferencedBlobCount == 0)
    }

    @Test func verifyIsCleanAndReportsProgress() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .packed())
        _ = try PackFixture(store: store, blobs: 20)
        var phases: [MaintenanceProgress.Phase] = []
        var lastBlobs: MaintenanceProgress?
        let report = try store.verify(.init(readData: true)) { progress in
            if phases.last != progress.phase { phases.append(progress.phase) }
            if progress.phase == .checkingBlobs { lastBlobs = progress }
        }
        #expect(report.isClean)
        #expect(report.blobsChecked == 20 && report.recordsChecked == 20 && report.readData)
        #expect(phases == [.checkingLog, .checkingReferences, .checkingBlobs])
        #expect(lastBlobs == MaintenanceProgress(phase: .checkingBlobs, completed: 20, total: 20))

        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any]
        #expect(json?["isClean"] as? Bool == true)
        #expect((json?["problems"] as? [Any])?.isEmpty == true)
    }

    @Test func verifyFindsABitFlipInBlobDataOnlyWhenReadingData() throws {
        let dir = TemporaryDirectory()
        let (digest, location) = try storeOneBlob(in: dir)
        let path = packPath(dir, location.pack)
        try flipBitInPlace(path, at: location.offset + UInt64(PackFormat.entryHeaderSize) + 100)

        let store = try Store(at: dir.store, configuration: .testing())
        #expect(try store.verify().isClean, "structure only: the header still matches the index")
        let report = try store.verify(.init(readData: true))
        let problem = try #require(report.problems.first)
        #expect(report.problems.count == 1)
        #expect(problem.kind == "blobData")
        #expect(problem.digest == digest)
        #expect(problem.path == path)
        #expect(problem.offset == location.offset)
        #expect(problem.message.contains(path))
    }

    @Test func verifyReadingDataFindsAnEntryWhoseCRCNoLongerMatches() throws {
        let dir = TemporaryDirectory()
        let (digest, location) = try storeOneBlob(in: dir)
        let path = packPath(dir, location.pack)
        // The checksum field: the blob still decodes and hashes to its digest, so only the CRC tells.
        try flipBitInPlace(path, at: location.offset + UInt64(PackFormat.entryHeaderSize) - 1)

        let store = try Store(at: dir.store, configuration: .testing())
        #expect(try store.get(digest).count == 5000, "a re-hashing read does not look at the CRC")
        let report = try store.verify(.init(readData: true))
        let problem = try #require(report.problems.first)
        #expect(report.problems.count == 1)
        #expect(problem.kind == "blobData")
        #expect(problem.digest == digest)
        #expect(problem.path == path)
        #expect(problem.offset == location.offset)
        #expect(problem.message.contains("CRC32C"))
        #expect(problem.message.contains(path) && problem.message.contains("offset \(location.offset)"))
    }

    @Test func verifyFindsADamagedEntryHeader() throws {
        let dir = TemporaryDirectory()
        let (digest, location) = try storeOneBlob(in: dir)
        let path = packPath(dir, location.pack)
        try flipBitInPlace(path, at: location.offset + 20)  // inside the digest field

        let store = try Store(at: dir.store, configuration: .testing())
        let problems = try store.verify().problems
        #expect(problems.map(\.kind) == ["packEntry"])
        #expect(problems.first?.digest == digest)
        #expect(problems.first?.path == path)
        #expect(problems.first?.offset == location.offset)
    }

    @Test func verifyFindsAMissingPack() throws {
        let dir = TemporaryDirectory()
        let (digest, location) = try storeOneBlob(in: dir)
        let path = packPath(dir, location.pack)
        try FileManager.default.removeItem(atPath: path)

        let store = try Store(at: dir.store, configuration: .testing())
        let problems = try store.verify().problems
        #expect(problems.map(\.kind) == ["missingPack"])
        #expect(problems.first?.path == path)
        #expect(problems.first?.digest == digest)
    }

    @Test func verifyFindsAMissingPackEvenWhileTheStoreHoldsItOpen() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(Data("held open".utf8))
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
        let pack = try #require(store.core.withLock { $0.state.blobs[digest] }).location.pack
        try FileManager.default.removeItem(atPath: store.packs.path(of: pack))
        #expect(try store.verify().problems.map(\.kind) == ["missingPack"])
    }

    @Test func verifyFindsAReferenceCountThatDisagreesWithTheRecords() throws {
        let dir = TemporaryDirectory()
        let (digest, _) = try storeOneBlob(in: dir)
        try rewriteCheckpoint(dir) { state in
            // What a bug in count maintenance would leave: the checksums are all valid.
            let adjusted = state.blobs.adjustReferences(of: digest, by: 1, time: 0)
            #expect(adjusted)
        }
        let store = try Store(at: dir.store, configuration: .testing())
        let problems = try store.verify().problems
        #expect(problems.map(\.kind) == ["refCount"])
        #expect(problems.first?.digest == digest)
        #expect(problems.first?.message.contains("2") == true)
    }

    @Test func verifyFindsADamagedPackHeader() throws {
        let dir = TemporaryDirectory()
        let (_, location) = try storeOneBlob(in: dir)
        let path = packPath(dir, location.pack)
        try flipBitInPlace(path, at: 17)  // the pack's creation time, under the header checksum
        let store = try Store(at: dir.store, configuration: .testing())
        let problems = try store.verify().problems
        #expect(problems.map(\.kind) == ["packHeader"])
        #expect(problems.first?.path == path)
    }
}

/// Creates a store with one referenced blob (record "k"), checkpointed and closed.
private func storeOneBlob(in dir: TemporaryDirectory) throws -> (Digest, BlobLocation) {
    let store = try Store(at: dir.store, configuration: .testing())
    var random = SeededRandom(seed: 3)
    let digest = try store.put(random.compressibleBytes(5000))
    try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
    let location = try #require(store.core.withLock { $0.state.blobs[digest] }?.location)
    try store.checkpoint()
    try store.close()
    return (digest, location)
}

private func packPath(_ dir: TemporaryDirectory, _ pack: UInt32) -> String {
    dir.store.appendingPathComponent("packs").appendingPathComponent(PackFormat.fileName(pack)).path
}

/// Loads the newest checkpoint, lets `change` edit the state, and writes it back with valid checksums.
func rewriteCheckpoint(_ dir: TemporaryDirectory, _ change: (inout StoreState) throws -> Void) throws {
    let directory = dir.store.appendingPathComponent("checkpoint")
    let file = try #require(try files(in: directory, withExtension: "ckpt").last)
    var contents = try Checkpoint.load(path: file.path, limits: Store.Limits(), fileSystem: FileSystem(io: SystemFileIO()))
    try change(&contents.state)
    try Checkpoint.write(contents, directory: directory.path, fileSystem: FileSystem(io: SystemFileIO()))
}
