import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A durable commit carries the few pack bytes it relies on in its WAL batch instead of syncing the
/// pack (Docs/durability.md): one sync per small commit. These tests count the syncs through the
/// power-cut model and check that recovery writes the carried bytes back.
@Suite("Commit path: pack bytes in the WAL", .blocking)
struct CommitPathTests {
    /// A store on ``PowerCutFileIO``, durable commits.
    struct Fixture {
        let dir = TemporaryDirectory()
        let io: PowerCutFileIO
        let store: Store
        var random = SeededRandom(seed: 0xc0)

        init(loggedPackBytesLimit: Int? = nil, packSizeTarget: UInt64? = nil) throws {
            io = PowerCutFileIO(root: dir.url)
            var configuration = Store.Configuration()
            if let packSizeTarget { configuration.packSizeTarget = packSizeTarget }
            var seams = Store.Seams()
            seams.fileIO = io
            if let loggedPackBytesLimit { seams.loggedPackBytesLimit = loggedPackBytesLimit }
            store = try Store(at: dir.store, configuration: configuration, seams: seams)
        }

        /// Puts `data`, commits a record referencing it, and returns the digest and the syncs the
        /// put and commit made (paths relative to the store).
        func commit(_ data: Data, key: String) throws -> (Digest, [String]) {
            let before = io.syncedPaths.count
            let digest = try store.put(data)
            try store.write { try $0.setRecord(Record(value: Data(key.utf8), references: [digest]), forKey: key) }
            let root = dir.store.path + "/"
            return (digest, io.syncedPaths[before...].map { $0.hasPrefix(root) ? String($0.dropFirst(root.count)) : $0 })
        }

        /// The store as a power cut now would leave it, with nothing unsynced kept.
        func powerCutImage() throws -> URL {
            var random = SeededRandom(seed: 1)
            let image = dir.url.appendingPathComponent("image")
            try io.writeImage(to: image, mode: .durableOnly, random: &random)
            return image.appendingPathComponent("store")
        }
    }

    static func isSegment(_ path: String) -> Bool { path.hasPrefix("wal/") && path.hasSuffix(".log") }
    static func isPack(_ path: String) -> Bool { path.hasPrefix("packs/") && path.hasSuffix(".pack") }

    @Test func aSmallCommitSyncsOnlyTheLog() throws {
        var fixture = try Fixture()
        // The first commit after a pack is created also syncs the pack directory, so the pack
        // recovery writes the bytes back into exists.
        let first = fixture.random.bytes(1024)
        let (_, creating) = try fixture.commit(first, key: "k0")
        #expect(creating.count == 2 && creating.first == "packs" && Self.isSegment(creating[creating.count - 1]), "\(creating)")
        var blobs = [first]
        for round in 1 ... 4 {
            let data = round % 2 == 0 ? fixture.random.bytes(1024) : fixture.random.compressibleBytes(4096)
            let (_, syncs) = try fixture.commit(data, key: "k\(round)")
            #expect(syncs.count == 1 && Self.isSegment(syncs[0]), "commit \(round) synced \(syncs)")
            blobs.append(data)
        }
        // A commit without blobs syncs the log once as well.
        let before = fixture.io.syncCount
        try fixture.store.write { try $0.setRecord(Record(value: Data("plain".utf8)), forKey: "plain") }
        #expect(fixture.io.syncCount == before + 1)

        // A power cut now: the pack holds nothing durable (not even its header); the WAL holds it all.
        let image = try fixture.powerCutImage()
        let pack = try files(in: image.appendingPathComponent("packs"), withExtension: "pack")
        #expect(pack.count == 1)
        #expect(try Data(contentsOf: pack[0]).isEmpty)
        let recovered = try Store(at: image)
        for (index, data) in blobs.enumerated() {
            let digest = try #require(try recovered.record(forKey: "k\(index)")?.references.first)
            #expect(try recovered.get(digest) == data)
        }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    /// `verify` writes out the log to read it. Were that write unsynced, a power cut could keep a
    /// put's placement and lose its pack bytes: an index entry pointing at nothing, which a later put
    /// of the same bytes would dedup against. Whatever a cut keeps, an indexed blob reads back.
    @Test func verifyNeverLeavesAPlacementWithoutItsBytes() throws {
        var fixture = try Fixture()
        _ = try fixture.commit(fixture.random.bytes(1024), key: "k0")
        let data = fixture.random.bytes(4096)
        let digest = try fixture.store.put(data)
        #expect(try fixture.store.verify().isClean)
        for seed in UInt64(1) ... 24 {
            var random = SeededRandom(seed: seed)
            let image = fixture.dir.url.appendingPathComponent("image\(seed)")
            try fixture.io.writeImage(to: image, mode: .random, random: &random)
            let recovered = try Store(at: image.appendingPathComponent("store"))
            #expect(recovered.contains(digest), "seed \(seed): the blob verify made durable is gone")
            if recovered.contains(digest) {
                #expect(throws: Never.self, "seed \(seed): indexed, but its bytes are lost") { try recovered.get(digest) }
            }
            try recovered.close()
        }
    }

    /// The pack bytes a commit carries come from the copy the pack store keeps of what it just
    /// appended (no read-back), or from the file when that copy is not kept (a put larger than
    /// `PackStore.tailLimit`, a pack's first commit after a sync): either way they must be the
    /// pack's bytes exactly, or recovery writes wrong ones. With nothing of the packs durable, every
    /// blob reads back from what the log carried: small and large puts, several per commit, packs
    /// sealed and started (a small size target), checkpoints between.
    @Test(arguments: [UInt64(1), 2, 3])
    func carriedPackBytesAreThePacksBytes(seed: UInt64) throws {
        var fixture = try Fixture(packSizeTarget: 256 * 1024)
        var random = SeededRandom(seed: seed)
        var committed: [(digest: Digest, data: Data)] = []
        for round in 0 ..< 40 {
            let puts = Int.random(in: 0 ... 3, using: &random)
            var blobs: [(digest: Digest, data: Data)] = []
            for _ in 0 ..< puts {
                let size = [1, 90, 700, 5000, 70 * 1024][Int.random(in: 0 ..< 5, using: &random)]
                let data = Bool.random(using: &random) ? fixture.random.bytes(size) : fixture.random.compressibleBytes(size)
                blobs.append((try fixture.store.put(data), data))
            }
            let record = Record(value: Data("round \(round)".utf8), references: blobs.map(\.digest))
            try fixture.store.write { try $0.setRecord(record, forKey: "k\(round)") }
            committed += blobs
            if round % 13 == 12 { try fixture.store.checkpoint() }
        }
        let recovered = try Store(at: try fixture.powerCutImage())
        for (digest, data) in committed { #expect(try recovered.get(digest) == data) }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    @Test func aLargeBlobSyncsItsPackBeforeTheLog() throws {
        var fixture = try Fixture()
        _ = try fixture.commit(fixture.random.bytes(100), key: "small")
        // Incompressible and above the 512 KiB default: the pack is synced, then the log.
        let large = fixture.random.bytes(600 * 1024)
        let (digest, syncs) = try fixture.commit(large, key: "large")
        #expect(syncs.count == 2 && Self.isPack(syncs[0]) && Self.isSegment(syncs[1]), "\(syncs)")

        let recovered = try Store(at: try fixture.powerCutImage())
        #expect(try recovered.get(digest) == large)
        try recovered.close()
    }

    @Test func withNoLimitEveryCommitSyncsThePackFirst() throws {
        var fixture = try Fixture(loggedPackBytesLimit: 0)
        _ = try fixture.commit(fixture.random.bytes(100), key: "first")
        let (_, syncs) = try fixture.commit(fixture.random.bytes(100), key: "second")
        #expect(syncs.count == 2 && Self.isPack(syncs[0]) && Self.isSegment(syncs[1]), "\(syncs)")
    }

    @Test func aCheckpointSyncsThePacksBeforeTheSegmentsCarryingTheirBytesGo() throws {
        var fixture = try Fixture()
        var committed: [(Digest, Data)] = []
        for index in 0 ..< 3 {
            let data = fixture.random.bytes(2000)
            committed.append((try fixture.commit(data, key: "k\(index)").0, data))
        }
        try fixture.store.checkpoint()
        let image = try fixture.powerCutImage()
        // The segments that carried the pack bytes are gone, so the pack itself must hold them.
        let recovered = try Store(at: image)
        for (digest, data) in committed { #expect(try recovered.get(digest) == data) }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        /// The pack file is empty (its header and entries never reached the disk).
        case emptied
        /// The last entry is cut short.
        case tornLastEntry
        /// The file is cut after the header and the first half is zeros.
        case zeroed
        /// One byte of the first entry's payload is flipped.
        case flippedByte

        var testDescription: String { rawValue }

        func apply(to pack: URL) throws {
            var bytes = try Data(contentsOf: pack)
            switch self {
            case .emptied: bytes = Data()
            case .tornLastEntry: bytes.removeLast(300)
            case .zeroed:
                bytes.replaceSubrange(0 ..< bytes.count / 2, with: Data(count: bytes.count / 2))
                bytes.removeLast(bytes.count / 3)
            case .flippedByte: bytes[PackFormat.headerSize + PackFormat.entryHeaderSize + 10] ^= 0x40
            }
            try bytes.write(to: pack)
        }
    }

    @Test(arguments: Damage.allCases)
    func recoveryWritesTheCarriedBytesBackIntoADamagedPack(_ damage: Damage) throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 0xda)
        var committed: [(Digest, Data)] = []
        let store = try Store(at: dir.store)
        for index in 0 ..< 6 {
            let data = index % 2 == 0 ? random.bytes(500 + 700 * index) : random.compressibleBytes(3000)
            let digest = try store.put(data)
            try store.write { try $0.setRecord(Record(value: Data([UInt8(index)]), references: [digest]), forKey: "k\(index)") }
            committed.append((digest, data))
        }
        try store.close()
        let pack = try #require(try files(in: dir.store.appendingPathComponent("packs"), withExtension: "pack").first)
        let intact = try Data(contentsOf: pack)
        try damage.apply(to: pack)
        #expect(try Data(contentsOf: pack) != intact)

        let recovered = try Store(at: dir.store)
        #expect(try Data(contentsOf: pack) == intact)
        for (digest, data) in committed { #expect(try recovered.get(digest) == data) }
        #expect(try recovered.verify(VerificationOptions(readData: true)).isClean)
        try recovered.close()
    }

    @Test func aDeletedPackNumberIsNotReusedWhileTheLogCarriesBytesForIt() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let configuration = Store.Configuration.testing(durability: .full, clock: clock)
        var random = SeededRandom(seed: 0x1d)
        let first = try Store(at: dir.store, configuration: configuration)
        let old = try first.put(random.bytes(3000))
        try first.write { try $0.setRecord(Record(value: Data([1]), references: [old]), forKey: "old") }
        try first.close()

        // A later process lets the blob die; collection deletes its pack, the highest one.
        let second = try Store(at: dir.store, configuration: configuration)
        try second.write { try $0.removeRecord(forKey: "old") }
        clock.advance(by: 7200)
        let report = try second.collectGarbage()
        #expect(report.packsDeleted == 1)
        try second.close()
        #expect(try files(in: dir.store.appendingPathComponent("packs"), withExtension: "pack").isEmpty)

        // The WAL still carries pack 1's bytes, so a new pack must not be pack 1 again: recovery
        // would write the old bytes over the new blob (too large to be carried itself).
        let third = try Store(at: dir.store, configuration: configuration)
        let new = random.bytes(600 * 1024)
        let digest = try third.put(new)
        try third.write { try $0.setRecord(Record(value: Data([2]), references: [digest]), forKey: "new") }
        #expect(third.packs.packIDs == [2])
        try third.close()

        let fourth = try Store(at: dir.store, configuration: configuration)
        #expect(try fourth.get(digest) == new)
        #expect(try fourth.verify(VerificationOptions(readData: true)).isClean)
        try fourth.close()
    }
}
