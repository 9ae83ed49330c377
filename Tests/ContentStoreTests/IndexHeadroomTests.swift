import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// The blob index an open restores from a checkpoint keeps room for the puts that follow (issue 19:
/// sized exactly, the first put after opening a million-blob store grew the whole table).
@Suite(.blocking) struct IndexHeadroomTests {
    @Test(arguments: [0, 3_000, 200_000])
    func aRestoredIndexTakesItsHeadroomOfPutsWithoutGrowing(count: Int) {
        let digests = (0 ..< count).map { Digest.sha256(Data("restored \($0)".utf8)) }
        var index = BlobIndex(restoringCapacity: count, seed: 19)
        for (i, digest) in digests.enumerated() {
            index.restore(digest, BlobEntry(location: BlobLocation(pack: 1, offset: UInt64(32 + 100 * i)), compressed: false,
                                            manifest: false, rawLength: 44, storedLength: 44, refCount: 1, zeroSince: 0))
        }
        let headroom = BlobIndex.restoringHeadroom(count)
        #expect(headroom >= max(1024, count / 20))
        #expect(index.entries.capacity >= count + headroom)
        // Capacity, not bytes: a run reaching the table's last slot lengthens its short tail (a few slots)
        // without growing it.
        let capacity = index.entries.capacity
        for i in 0 ..< headroom {
            index.place(LogRecord.BlobPlacement(digest: Digest.sha256(Data("put \(i)".utf8)), location: BlobLocation(pack: 2, offset: UInt64(32 + 100 * i)),
                                                compressed: false, rawLength: 44, storedLength: 44, time: 0))
        }
        #expect(index.count == count + headroom)
        #expect(index.entries.capacity == capacity, "the table grew within its headroom")
        for digest in digests.prefix(100) { #expect(index[digest]?.refCount == 1) }
    }

    /// The same through a real store: closed with a checkpoint, reopened, then put to.
    @Test func aReopenedStoreTakesPutsWithoutGrowingItsIndex() throws {
        let dir = TemporaryDirectory()
        let blobs = 2_000
        do {
            let store = try Store(at: dir.store, configuration: .testing())
            let digests = try (0 ..< blobs).map { try store.put(Data("blob \($0)".utf8)) }
            try store.write { transaction in
                for (i, digest) in digests.enumerated() { try transaction.setRecord(Record(references: [digest]), forKey: "k\(i)") }
            }
            try store.checkpoint()
            try store.close()
        }
        let store = try Store(at: dir.store, configuration: .testing())
        let capacity = store.core.withLock { $0.state.blobs.entries.capacity }
        for i in 0 ..< 1024 { try store.put(Data("new blob \(i)".utf8)) }
        #expect(store.core.withLock { $0.state.blobs.entries.capacity } == capacity, "the table grew within its headroom")
        #expect(try store.statistics().blobCount == blobs + 1024)
        try store.close()
    }
}
