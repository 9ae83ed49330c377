import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// The zeros the writer extends the last WAL segment by, ahead of its batches (Docs/durability.md):
/// where they may be, and that recovery reads them, and whatever a crash left among them, as the end
/// of the log without dropping a commit or ever replaying stale frames.
@Suite(.blocking) struct WALPreallocationTests {
    /// Where the frames of `bytes` end (at the first one that does not read) and its salt.
    func framesEnd(_ bytes: [UInt8]) throws -> (end: Int, salt: UInt32) {
        try bytes.withUnsafeBytes { raw in
            let header = try #require(WALFormat.parseHeader(raw))
            var offset = WALFormat.headerSize
            while let frame = WALFormat.frame(in: raw, at: offset, salt: header.salt, maximumPayload: 1 << 20) {
                offset += WALFormat.frameHeaderSize + frame.payload.count
            }
            return (offset, header.salt)
        }
    }

    func segments(of store: URL) throws -> [URL] { try files(in: store.appendingPathComponent("wal"), withExtension: "log") }

    func commit(_ store: Store, _ key: String) throws {
        try store.write { try $0.setRecord(Record(value: Data("value of \(key)".utf8)), forKey: key) }
    }

    @Test func anOpenStoresLastSegmentEndsInZerosThatACleanCloseCuts() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing(durability: .full)
        configuration.walSegmentSize = 1 << 16
        let store = try Store(at: dir.store, configuration: configuration)
        for i in 0 ..< 400 {
            try store.write { try $0.setRecord(Record(value: Data(repeating: UInt8(i % 256), count: 1024)), forKey: "key \(i)") }
        }
        let open = try segments(of: dir.store)
        #expect(open.count > 2)
        for (index, segment) in open.enumerated() {
            let bytes = try Array(Data(contentsOf: segment))
            let end = try framesEnd(bytes).end
            if index == open.count - 1 {
                #expect(bytes.count > end)
                #expect(bytes[end...].allSatisfy { $0 == 0 })
            } else {
                #expect(bytes.count == end, "segment \(index + 1) kept zeros after its rotation")
            }
        }
        try store.close()
        let last = try #require(try segments(of: dir.store).last)
        let bytes = try Array(Data(contentsOf: last))
        #expect(bytes.count == (try framesEnd(bytes).end))
        #expect(try allRecords(try Store(at: dir.store, configuration: .testing())).count == 400)
    }

    /// A crash image of an open store with `commits` commits (keys "key 0", "key 1", ...): its files as
    /// they are now (all its writes are in the page cache), without the close that would cut the zeros.
    /// Returns the image, its last segment and where its frames end.
    func crashImage(in dir: TemporaryDirectory, commits: Int) throws -> (image: URL, segment: URL, end: Int) {
        let store = try Store(at: dir.store, configuration: .testing(durability: .full))
        for i in 0 ..< commits { try commit(store, "key \(i)") }
        let image = dir.url.appendingPathComponent("image")
        try copyDirectory(dir.store, to: image)
        try store.close()
        let segment = try #require(try segments(of: image).last)
        let end = try framesEnd(Array(Data(contentsOf: segment))).end
        #expect(try Data(contentsOf: segment).count > end)
        return (image, segment, end)
    }

    func overwrite(_ file: URL, at offset: Int, with bytes: [UInt8]) throws {
        let handle = try FileHandle(forWritingTo: file)
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    @Test func aTornBatchAmongTheZerosIsCutAndTheLogContinuesAfterTheLastCommit() throws {
        let dir = TemporaryDirectory()
        let (image, segment, end) = try crashImage(in: dir, commits: 5)
        // The start of a batch whose later sectors never reached the disk: its sync point and the head
        // of a commit frame, then zeros.
        var claim = ByteWriter(capacity: 8)
        claim.append(UInt64(end))
        var torn: [UInt8] = []
        WALFormat.appendFrame(kind: WALFormat.syncPointKind, payload: claim.bytes, salt: try framesEnd(Array(Data(contentsOf: segment))).salt, to: &torn)
        let syncPointEnd = end + torn.count
        torn += [200, 0, 0, 0, 1, 2, 3, 4, LogRecord.Kind.commit.rawValue, 9, 9]
        try overwrite(segment, at: end, with: torn)

        let store = try Store(at: image, configuration: .testing(durability: .full))
        #expect(try allRecords(store).count == 5)
        #expect(try Data(contentsOf: segment).count == syncPointEnd, "recovery left bytes after the last intact frame")
        try commit(store, "after")
        try store.close()
        let reopened = try Store(at: image, configuration: .testing())
        #expect(try allRecords(reopened).count == 6)
        #expect(try reopened.record(forKey: "after") != nil)
    }

    @Test func validLookingFramesBeyondTheZerosAreNeverReplayed() throws {
        let dir = TemporaryDirectory()
        let (image, segment, end) = try crashImage(in: dir, commits: 5)
        // Each commit was a batch of its own, all of one size: a sync point and a commit frame.
        let batchSize = (end - WALFormat.headerSize) / 5
        #expect((end - WALFormat.headerSize) % 5 == 0)
        // The first batch again, beyond the zeros, where the third batch after recovery ends: it passes
        // its checksums, but nothing vouches for it, so it is a torn write...
        let bytes = try Array(Data(contentsOf: segment))
        try overwrite(segment, at: end + 3 * batchSize, with: Array(bytes[WALFormat.headerSize ..< WALFormat.headerSize + batchSize]))

        // ... which recovery cuts, so that a later recovery, reading on from the batches written after
        // this one, does not meet it right where they end and replay it.
        let store = try Store(at: image, configuration: .testing(durability: .full))
        #expect(try allRecords(store).count == 5)
        #expect(try Data(contentsOf: segment).count == end)
        for i in 5 ..< 8 { try commit(store, "key \(i)") }
        let second = dir.url.appendingPathComponent("second")
        try copyDirectory(image, to: second)
        try store.close()
        let secondSegment = second.appendingPathComponent("wal").appendingPathComponent(segment.lastPathComponent)
        #expect(try framesEnd(Array(Data(contentsOf: secondSegment))).end == end + 3 * batchSize)
        let recovered = try Store(at: second, configuration: .testing())
        #expect(try allRecords(recovered).count == 8)
    }

    @Test func damageToSyncedBytesIsStillCorruptionWhenZerosFollow() throws {
        let dir = TemporaryDirectory()
        let (image, segment, end) = try crashImage(in: dir, commits: 5)
        // The first commit's bytes damaged: the later batches' sync points vouch for them.
        var bytes = try Array(Data(contentsOf: segment))
        #expect(bytes.count > end)
        bytes[WALFormat.headerSize + 20] ^= 0x10
        try Data(bytes).write(to: segment)
        let error = try #require(throws: StoreError.self) { try Store(at: image, configuration: .testing()) }
        #expect(error.code == .corrupted)
        #expect(error.path == segment.path)
        #expect(error.offset == UInt64(WALFormat.headerSize + WALFormat.frameHeaderSize + 8))
    }

    @Test func aFrameWithAnEmptyPayloadIsNeverAFrame() {
        var frame: [UInt8] = []
        WALFormat.appendFrame(kind: LogRecord.Kind.commit.rawValue, payload: [], salt: 7, to: &frame)
        frame += [0, 0, 0, 0]
        #expect(frame.withUnsafeBytes { WALFormat.frame(in: $0, at: 0, salt: 7, maximumPayload: 1024) } == nil)
    }
}
