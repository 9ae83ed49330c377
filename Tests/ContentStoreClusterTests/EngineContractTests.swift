import ContentStore
import Foundation
import Testing
import TestThreads

/// The engine's contract, one suite on two backends: what every `Store` promises (DESIGN.md rules
/// 1–7) holds on the embedded engine and on the cluster engine alike.
@Suite(.blocking) struct EngineContractTests {
    static func randomData(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0 ..< count).map { _ in UInt8.random(in: 0 ... 255, using: &generator) })
    }

    @Test(arguments: StoreBackend.available)
    func putGetAndDeduplication(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let small = Data("hello, cluster".utf8)
            let compressible = Data(repeating: 7, count: 300_000)
            let large = Self.randomData(200_000)  // incompressible: over the inline limit, so a pack
            for data in [small, compressible, large] {
                let digest = try store.put(data)
                #expect(digest == Digest.sha256(data))
                #expect(try store.get(digest) == data)
                #expect(try store.put(data) == digest)
                #expect(store.contains(digest))
                #expect(store.refCount(of: digest) == 0)
                #expect(store.info(for: digest)?.size == data.count)
            }
            let unknown = Digest.sha256(Data("never put".utf8))
            #expect(!store.contains(unknown))
            #expect(store.info(for: unknown) == nil)
            #expect(throws: StoreError(code: .notFound, message: "")) { try store.get(unknown) }
            let statistics = try store.statistics()
            #expect(statistics.blobCount == 3)
            #expect(statistics.logicalBytes == UInt64(small.count + compressible.count + large.count))
        }
    }

    @Test(arguments: StoreBackend.available)
    func recordsCountsAndKeyOrder(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let a = try store.put(Data("a".utf8))
            let b = try store.put(Data("b".utf8))
            try store.write { transaction in
                try transaction.setRecord(Record(value: Data("one".utf8), references: [a, a, b]), forKey: "k1")
                try transaction.setRecord(Record(value: Data("two".utf8)), forKey: "k2")
                #expect(try transaction.record(forKey: "k1")?.value == Data("one".utf8))
            }
            #expect(store.refCount(of: a) == 2)
            #expect(store.refCount(of: b) == 1)
            #expect(try store.record(forKey: "k1") == Record(value: Data("one".utf8), references: [a, a, b]))
            try store.write { try $0.setRecord(Record(value: Data(), references: [b]), forKey: "k1") }
            #expect(store.refCount(of: a) == 0)
            #expect(store.refCount(of: b) == 1)
            try store.write { try $0.removeRecord(forKey: "k1") }
            #expect(store.refCount(of: b) == 0)
            #expect(try store.record(forKey: "k1") == nil)

            // UTF-8 byte order, whatever the database's locale: "Z" < "a" < "ab" < "b" < "é" < "😀".
            let keys = ["é", "b", "ab", "a", "Z", "😀"]
            try store.write { transaction in
                for key in keys { try transaction.setRecord(Record(value: Data(key.utf8)), forKey: "o/" + key) }
            }
            #expect(try store.keys(withPrefix: "o/") == ["Z", "a", "ab", "b", "é", "😀"].map { "o/" + $0 })
            #expect(try store.keys(withPrefix: "o/a") == ["o/a", "o/ab"])
            #expect(try store.keys(withPrefix: "none") == [])
        }
    }

    @Test(arguments: StoreBackend.available)
    func missingBlobAndThrownBodiesCommitNothing(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let present = try store.put(Data("present".utf8))
            let absent = Digest.sha256(Data("absent".utf8))
            let error = #expect(throws: StoreError.self) {
                try store.write { transaction in
                    try transaction.setRecord(Record(references: [present]), forKey: "fine")
                    try transaction.setRecord(Record(references: [absent]), forKey: "bad")
                }
            }
            #expect(error?.code == .missingBlob)
            #expect(error?.message.contains(absent.hex) == true)
            #expect(try store.record(forKey: "fine") == nil)
            #expect(store.refCount(of: present) == 0)

            struct Abort: Error {}
            #expect(throws: Abort.self) {
                try store.write { transaction in
                    try transaction.setRecord(Record(references: [present]), forKey: "fine")
                    throw Abort()
                }
            }
            #expect(try store.record(forKey: "fine") == nil)
            #expect(store.refCount(of: present) == 0)
        }
    }

    @Test(arguments: StoreBackend.available)
    func badInputIsRefusedAndChangesNothing(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ throws in
            #expect(throws: StoreError(code: .invalidArgument, message: "")) { try store.record(forKey: "") }
            #expect(throws: StoreError(code: .invalidArgument, message: "")) {
                try store.write { try $0.setRecord(Record(), forKey: "a\0b") }
            }
            let long = String(repeating: "k", count: store.configuration.limits.maximumKeyLength + 1)
            #expect(throws: StoreError(code: .limitExceeded, message: "")) {
                try store.write { try $0.setRecord(Record(), forKey: long) }
            }
            let value = Data(count: store.configuration.limits.maximumValueLength + 1)
            #expect(throws: StoreError(code: .limitExceeded, message: "")) {
                try store.write { try $0.setRecord(Record(value: value), forKey: "big") }
            }
            #expect(try store.keys(withPrefix: "") == [])
            #expect(try store.verify().isClean)
        }
    }

    @Test(arguments: StoreBackend.available)
    func snapshotsAreConsistent(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            try store.write { try $0.setRecord(Record(value: Data("old".utf8)), forKey: "s/1") }
            try store.read { snapshot in
                try store.write { transaction in
                    try transaction.setRecord(Record(value: Data("new".utf8)), forKey: "s/1")
                    try transaction.setRecord(Record(value: Data("added".utf8)), forKey: "s/2")
                }
                #expect(try snapshot.record(forKey: "s/1")?.value == Data("old".utf8))
                #expect(try snapshot.keys(withPrefix: "s/") == ["s/1"])
            }
            #expect(try store.record(forKey: "s/1")?.value == Data("new".utf8))
            #expect(try store.keys(withPrefix: "s/") == ["s/1", "s/2"])
        }
    }

    @Test(arguments: StoreBackend.available)
    func collectionKeepsGraceReferencesAndPins(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let loose = try store.put(Self.randomData(100_000))
            Thread.sleep(forTimeInterval: 1.1)  // the embedded store counts whole seconds
            let pinned = try store.put(Data("pinned".utf8))
            let referenced = try store.put(Data("referenced".utf8))
            try store.write { transaction in
                try transaction.setRecord(Record(references: [pinned]), forKey: "p")
                try transaction.setRecord(Record(references: [referenced]), forKey: "r")
            }
            // Within the grace period nothing unreferenced goes.
            #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(3600))).blobsRemoved == 0)
            #expect(store.contains(loose))

            var snapshot: Snapshot? = try store.makeSnapshot()
            try store.write { try $0.removeRecord(forKey: "p") }
            Thread.sleep(forTimeInterval: 1.1)
            _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            #expect(!store.contains(loose))
            #expect(store.contains(pinned), "a live snapshot still references it")
            #expect(store.contains(referenced))
            #expect(try snapshot?.get(pinned) == Data("pinned".utf8))
            snapshot = nil
            #expect(try becomesTrue {
                _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
                return !store.contains(pinned)
            })
            #expect(try store.get(referenced) == Data("referenced".utf8))
            #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        }
    }

    @Test(arguments: StoreBackend.available)
    func verifyAndStatisticsCoverEverything(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            var digests: [Digest] = []
            for index in 0 ..< 20 { digests.append(try store.put(Self.randomData(index.isMultiple(of: 5) ? 90_000 : 500))) }
            try store.write { transaction in
                for (index, digest) in digests.enumerated() {
                    try transaction.setRecord(Record(value: Data([UInt8(index)]), references: [digest]), forKey: "v/\(index)")
                }
            }
            let report = try store.verify(VerificationOptions(readData: true))
            #expect(report.isClean, "\(report.problems)")
            #expect(report.recordsChecked == 20)
            let statistics = try store.statistics()
            #expect(statistics.blobCount == 20)
            #expect(statistics.recordCount == 20)
            #expect(statistics.unreferencedBlobCount == 0)
        }
    }

    @Test(arguments: StoreBackend.available)
    func concurrentReadModifyWriteLosesNoUpdate(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0 ..< 4 {
                    group.addTask {
                        for _ in 0 ..< 25 { try Self.increment(store, key: "counter") }
                    }
                }
                try await group.waitForAll()
            }
            let total = try Self.counter(store, key: "counter")
            #expect(total == 100, "counter \(String(describing: total))")
        }
    }

    static func increment(_ store: Store, key: String) throws {
        try store.write { transaction in
            let current = try transaction.record(forKey: key).map { Int(String(decoding: $0.value, as: UTF8.self))! } ?? 0
            try transaction.setRecord(Record(value: Data(String(current + 1).utf8)), forKey: key)
        }
    }

    static func counter(_ store: Store, key: String) throws -> Int? {
        try store.record(forKey: key).map { Int(String(decoding: $0.value, as: UTF8.self))! }
    }
}
