import Foundation
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct RecordTests {
    /// A record keeps one reference inline and others in an array: no form shows through
    /// `references`, equality or hashing, and mutating `references` in place works in every form.
    @Test func referencesBehaveTheSameInEveryLayout() {
        let a = Digest.sha256(Data("a".utf8)), b = Digest.sha256(Data("b".utf8))
        let lists: [[Digest]] = [[], [a], [b], [a, a], [a, b], [b, a, b]]
        for list in lists {
            let record = Record(value: Data("v".utf8), references: list)
            #expect(record.references == list)
            for other in lists {
                let second = Record(value: Data("v".utf8), references: other)
                #expect((record == second) == (list == other))
                if list == other { #expect(record.hashValue == second.hashValue) }
            }
        }
        #expect(Record(value: Data(), onlyReference: a) == Record(references: [a]))
        var record = Record()
        for i in 0 ..< 5 {
            record.references.append(i % 2 == 0 ? a : b)
            #expect(record.references.count == i + 1)
        }
        #expect(record == Record(references: [a, b, a, b, a]))
        record.references.removeLast(4)
        #expect(record == Record(references: [a]))
        record.references = []
        #expect(record == Record())
    }

    /// The value lives inside the enum that tells the reference shapes apart: changing either one,
    /// by assignment or in place, keeps the other, in every shape and across shape changes.
    @Test(arguments: [0, 1, 2, 3])
    func valueAndReferencesChangeIndependently(referenceCount: Int) {
        let digests = (0 ..< 4).map { Digest.sha256(Data([UInt8($0)])) }
        let large = Data(repeating: 7, count: 100)  // past Data's inline bytes: a buffer of its own
        var record = Record(value: large, references: Array(digests.prefix(referenceCount)))
        record.value.append(8)
        #expect(record.value == large + [8])
        #expect(record.references == Array(digests.prefix(referenceCount)))
        record.references.append(digests[3])
        #expect(record.value == large + [8])
        #expect(record.references == Array(digests.prefix(referenceCount)) + [digests[3]])
        record.references = []
        #expect(record.value == large + [8])
        record.value = Data("v".utf8)
        record.references = [digests[0]]
        #expect(record == Record(value: Data("v".utf8), onlyReference: digests[0]))
        let copy = record
        record.value.append(9)  // copy on write: the copy keeps its value
        #expect(copy.value == Data("v".utf8))
        #expect(record.value == Data("v".utf8) + [9])
    }

    /// A million records sit in the record tree's leaves, so their size is memory per record
    /// (issue 19: ≤ 150 B per blob and record in all).
    @Test func aRecordTakesFortyEightBytes() {
        #expect(MemoryLayout<Record>.stride == 48)
    }

    @Test func transactionSeesItsOwnWritesAndCommitsAtomically() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let a = try store.put(Data("a".utf8))
        let b = try store.put(Data("b".utf8))
        try store.write { tx in
            try tx.setRecord(Record(value: Data("1".utf8), references: [a, a, b]), forKey: "k/1")
            try tx.setRecord(Record(value: Data("2".utf8)), forKey: "k/2")
            #expect(try tx.record(forKey: "k/1")?.references == [a, a, b])
            #expect(try tx.keys(withPrefix: "k/") == ["k/1", "k/2"])
            try tx.removeRecord(forKey: "k/2")
            #expect(try tx.keys(withPrefix: "k/") == ["k/1"])
            #expect(try store.record(forKey: "k/1") == nil)  // not visible before commit
        }
        #expect(store.refCount(of: a) == 2)
        #expect(store.refCount(of: b) == 1)
        #expect(try store.keys(withPrefix: "k/") == ["k/1"])
        try store.write { tx in try tx.setRecord(Record(references: [b]), forKey: "k/1") }
        #expect(store.refCount(of: a) == 0)
        #expect(store.refCount(of: b) == 1)
        try store.write { tx in try tx.removeRecord(forKey: "k/1") }
        #expect(store.refCount(of: b) == 0)
        #expect(try store.record(forKey: "k/1") == nil)
    }

    struct Abort: Error {}

    @Test func aThrownErrorCommitsNothing() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let a = try store.put(Data("a".utf8))
        #expect(throws: Abort.self) {
            try store.write { tx in
                try tx.setRecord(Record(references: [a]), forKey: "x")
                throw Abort()
            }
        }
        #expect(try store.record(forKey: "x") == nil)
        #expect(store.refCount(of: a) == 0)
    }

    @Test func missingBlobRefusesTheWholeTransaction() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let a = try store.put(Data("a".utf8))
        let unknown = Digest.sha256(Data("never put".utf8))
        let error = try #require(throws: StoreError.self) {
            try store.write { tx in
                try tx.setRecord(Record(references: [a]), forKey: "ok")
                try tx.setRecord(Record(references: [unknown]), forKey: "bad")
            }
        }
        #expect(error.code == .missingBlob)
        #expect(error.message.contains(unknown.hex))
        #expect(error.message.contains("bad"))
        #expect(try store.record(forKey: "ok") == nil)
        #expect(store.refCount(of: a) == 0)
    }

    /// A record's references replaced by a list that shares some of them: the counts move by the
    /// difference only, whether the lists are sorted (one merge pass) or not (every reference), with
    /// repeats, across two records of one commit, and through a reopen (the log replayed).
    @Test(arguments: [true, false])
    func partlyOverlappingReferenceListsMoveCountsByTheirDifference(sorted: Bool) throws {
        let dir = TemporaryDirectory()
        var store: Store? = try Store(at: dir.store, configuration: .testing())
        let digests = try (0 ..< 6).map { try store!.put(Data("blob \($0)".utf8)) }.sorted()
        let (a, b, c, d, e, f) = (digests[0], digests[1], digests[2], digests[3], digests[4], digests[5])
        func list(_ digests: [Digest]) -> [Digest] { sorted ? digests.sorted() : digests.sorted().reversed() }
        try store!.write { tx in
            try tx.setRecord(Record(references: list([a, b, b, c, d])), forKey: "one")
            try tx.setRecord(Record(references: list([d, e])), forKey: "two")
        }
        func counts() -> [Int] { digests.map { store!.refCount(of: $0) } }
        #expect(counts() == [1, 2, 1, 2, 1, 0])
        try store!.write { tx in
            // one: a dropped, one b of two dropped, c kept, d kept, e and f added; two: d moved away, e kept.
            try tx.setRecord(Record(references: list([b, c, d, e, f])), forKey: "one")
            try tx.setRecord(Record(references: list([e])), forKey: "two")
        }
        #expect(counts() == [0, 1, 1, 1, 2, 1])
        let unknown = Digest.sha256(Data("never put".utf8))
        let error = try #require(throws: StoreError.self) {
            try store!.write { tx in try tx.setRecord(Record(references: list([b, c, unknown])), forKey: "one") }
        }
        #expect(error.code == .missingBlob)
        #expect(error.message.contains(unknown.hex))
        #expect(counts() == [0, 1, 1, 1, 2, 1])
        try store!.close()
        store = try Store(at: dir.store, configuration: .testing())
        #expect(counts() == [0, 1, 1, 1, 2, 1])
        #expect(try store!.verify(VerificationOptions()).isClean)
    }

    @Test func keysAreSortedAndFilteredByPrefix() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let keys = ["b/2", "a/1", "b/10", "b/1", "c", "ä", "b", "🙂/x"]
        try store.write { tx in for key in keys { try tx.setRecord(Record(value: Data(key.utf8)), forKey: key) } }
        #expect(try store.keys(withPrefix: "") == keys.sorted())
        #expect(try store.keys(withPrefix: "b/") == ["b/1", "b/10", "b/2"])
        #expect(try store.keys(withPrefix: "zz").isEmpty)
        #expect(try store.record(forKey: "🙂/x")?.value == Data("🙂/x".utf8))
    }

    /// A transaction's listing merges its pending writes into the committed keys: checked against a
    /// model after every change of a random mix of sets and removals over committed keys, pending
    /// keys, and keys that are neither, under several prefixes.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func aTransactionListsItsOwnWritesMergedWithTheCommittedKeys(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: seed)
        let names = ["a", "a/1", "a/10", "a/2", "ab", "b", "b/x", "e", "e\u{20DD}", "é", "e\u{301}x", "🙂", "🙂/y", "z"]
        let committed = Set(names.filter { _ in random.next() % 2 == 0 })
        try store.write { tx in for key in committed { try tx.setRecord(Record(value: Data(key.utf8)), forKey: key) } }
        let prefixes = ["", "a", "a/", "b", "e", "🙂", "q"]
        try store.write { tx in
            var model = committed
            for _ in 0 ..< 60 {
                let key = names[Int(random.next() % UInt64(names.count))]
                if random.next() % 3 == 0 {
                    try tx.removeRecord(forKey: key)
                    model.remove(key)
                } else {
                    try tx.setRecord(Record(value: Data("new".utf8)), forKey: key)
                    model.insert(key)
                }
                for prefix in prefixes {
                    #expect(try tx.keys(withPrefix: prefix) == model.filter { $0.hasPrefix(prefix) }.sorted(), "prefix \"\(prefix)\"")
                }
            }
        }
    }

    @Test func snapshotsStayConsistentWhileWritersContinue() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let old = try store.put(Data("old".utf8))
        try store.write { tx in try tx.setRecord(Record(value: Data("1".utf8), references: [old]), forKey: "doc") }
        let snapshot = try store.makeSnapshot()
        try store.write { tx in
            try tx.removeRecord(forKey: "doc")
            try tx.setRecord(Record(value: Data("2".utf8)), forKey: "other")
        }
        #expect(try snapshot.record(forKey: "doc")?.value == Data("1".utf8))
        #expect(try snapshot.keys(withPrefix: "") == ["doc"])
        #expect(try snapshot.get(old) == Data("old".utf8))
        #expect(try store.read { try $0.keys(withPrefix: "") } == ["other"])
    }

    @Test func commitsSurviveReopen() throws {
        let dir = TemporaryDirectory()
        var expected: [String: Record] = [:]
        do {
            let store = try Store(at: dir.store, configuration: .testing(durability: .full))
            for i in 0 ..< 50 {
                let digest = try store.put(Data("blob \(i % 7)".utf8))
                let record = Record(value: Data("value \(i)".utf8), references: [digest])
                try store.write { tx in try tx.setRecord(record, forKey: "key \(i % 20)") }
                expected["key \(i % 20)"] = record
            }
            try store.close()
            try store.close()  // idempotent
        }
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(try allRecords(reopened) == expected)
    }

    @Test func automaticCheckpointsBoundTheLog() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.checkpointThreshold = 1 << 16
        configuration.walSegmentSize = 1 << 16
        var expected: [String: Record] = [:]
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            for i in 0 ..< 3000 {
                let record = Record(value: Data(repeating: UInt8(i % 251), count: 100))
                try store.write { tx in try tx.setRecord(record, forKey: "k\(i % 300)") }
                expected["k\(i % 300)"] = record
            }
            try store.close()
            #expect(throws: StoreError.code(.closed)) { try store.statistics() }
        }
        let checkpoints = try FileManager.default.contentsOfDirectory(atPath: dir.store.appendingPathComponent("checkpoint").path)
        #expect(checkpoints.count == 1)
        let reopened = try Store(at: dir.store, configuration: configuration)
        #expect(try reopened.statistics().walBytes < 4 << 16)
        #expect(try allRecords(reopened) == expected)
    }
}
