import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Seeded random operations against the store and an in-memory model of records and reference
/// counts, with reopens, checkpoints and collections in between.
@Suite(.blocking) struct ModelTests {
    struct Model {
        var records: [String: Record] = [:]
        var blobs: [Digest: Data] = [:]

        func refCount(_ digest: Digest) -> Int {
            records.values.reduce(0) { $0 + $1.references.filter { $0 == digest }.count }
        }

        mutating func collectUnreferenced() {
            let referenced = Set(records.values.flatMap(\.references))
            blobs = blobs.filter { referenced.contains($0.key) }
        }
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func randomOperationsMatchTheModel(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: seed)
        var configuration = Store.Configuration.testing()
        configuration.checkpointThreshold = 1 << 17  // exercise automatic checkpoints too
        var store = try Store(at: dir.store, configuration: configuration)
        var model = Model()
        let contents = (0 ..< 40).map { i in i % 3 == 0 ? random.compressibleBytes(Int(random.next() % 5000)) : random.bytes(Int(random.next() % 3000)) }
        let operations = 3400

        for step in 0 ..< operations {
            let roll = random.next() % 100
            switch roll {
            case 0 ..< 30:
                let data = contents[Int(random.next() % UInt64(contents.count))]
                let digest = try store.put(data)
                model.blobs[digest] = data
            case 30 ..< 75:
                var changes: [(String, Record?)] = []
                for _ in 0 ... random.next() % 3 {
                    let key = "key/\(random.next() % 60)"
                    if random.next() % 4 == 0 {
                        changes.append((key, nil))
                    } else {
                        let known = Array(model.blobs.keys)
                        let references = known.isEmpty ? [] : (0 ..< random.next() % 4).map { _ in known[Int(random.next() % UInt64(known.count))] }
                        changes.append((key, Record(value: random.bytes(Int(random.next() % 64)), references: references)))
                    }
                }
                try store.write { tx in
                    for (key, record) in changes {
                        if let record { try tx.setRecord(record, forKey: key) } else { try tx.removeRecord(forKey: key) }
                    }
                }
                for (key, record) in changes { model.records[key] = record }
            case 75 ..< 85:
                let unknown = Digest.sha256(random.bytes(16))
                #expect(throws: StoreError.code(.missingBlob)) {
                    try store.write { try $0.setRecord(Record(references: [unknown]), forKey: "key/0") }
                }
            case 85 ..< 93:
                let key = "key/\(random.next() % 60)"
                #expect(try store.record(forKey: key) == model.records[key], "step \(step)")
                for digest in model.records[key]?.references ?? [] {
                    #expect(store.refCount(of: digest) == model.refCount(digest), "step \(step)")
                    #expect(try store.get(digest) == model.blobs[digest], "step \(step)")
                }
            case 93 ..< 95:
                _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
                model.collectUnreferenced()
            case 95 ..< 97:
                try store.checkpoint()
            default:
                try store.close()
                store = try Store(at: dir.store, configuration: configuration)
                try expectEqual(store, model, step: step)
            }
        }
        try expectEqual(store, model, step: operations)
        #expect(try store.verify(.init(readData: true)).problems == [])
    }

    private func expectEqual(_ store: Store, _ model: Model, step: Int) throws {
        #expect(try allRecords(store) == model.records, "records differ at step \(step)")
        for (digest, data) in model.blobs {
            #expect(store.refCount(of: digest) == model.refCount(digest), "refcount of \(digest) at step \(step)")
            #expect(try store.get(digest) == data)
        }
        #expect(try store.statistics().blobCount == model.blobs.count, "blob count at step \(step)")
    }
}
