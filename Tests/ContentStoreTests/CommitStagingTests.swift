import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A commit changes the records first, each key walked to once for the change and the record it
/// replaces, and puts them back if a check fails: an unchanged rewrite logs nothing, a refused
/// commit leaves records, counts and log as they were, and counts move exactly by the references
/// the records gain and lose.
@Suite(.blocking) struct CommitStagingTests {
    /// The commit sequence and the log's end.
    func position(_ store: Store) -> (UInt64, UInt64) {
        (store.core.withLock { $0.state.commitSequence }, store.wal.appendedLSN)
    }

    // Mutant caught: changes that leave a key as it was kept (a commit logged for them).
    @Test func anUnchangedRewriteCommitsNothing() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let digest = try store.put(Data("blob".utf8))
        let record = Record(value: Data("v".utf8), references: [digest])
        try store.write { try $0.setRecord(record, forKey: "k") }
        let before = position(store)
        try store.write { transaction in
            try transaction.setRecord(record, forKey: "k")
            try transaction.removeRecord(forKey: "missing")
        }
        #expect(position(store) == before)
        #expect(store.refCount(of: digest) == 1)
        // Beside a real change, it is left out of the commit: the count stays 1.
        try store.write { transaction in
            try transaction.setRecord(record, forKey: "k")
            try transaction.setRecord(Record(), forKey: "other")
        }
        #expect(position(store).0 == before.0 + 1)
        #expect(store.refCount(of: digest) == 1)
    }

    // Mutant caught: the staged records not put back when the reference check refuses the commit.
    @Test func aMissingReferenceLeavesRecordsCountsAndLogUntouched() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let held = try store.put(Data("held".utf8)), other = try store.put(Data("other".utf8))
        let a = Record(value: Data("a".utf8), references: [held]), b = Record(value: Data("b".utf8))
        try store.write { transaction in
            try transaction.setRecord(a, forKey: "a")
            try transaction.setRecord(b, forKey: "b")
        }
        let before = position(store)
        let unknown = Digest.sha256(Data("never put".utf8))
        #expect(throws: StoreError.code(.missingBlob)) {
            try store.write { transaction in
                try transaction.setRecord(Record(references: [other]), forKey: "a")
                try transaction.removeRecord(forKey: "b")
                try transaction.setRecord(Record(), forKey: "c")
                try transaction.setRecord(Record(references: [unknown]), forKey: "d")
            }
        }
        #expect(position(store) == before)
        #expect((store.refCount(of: held), store.refCount(of: other)) == (1, 0))
        // The state the next transaction reads (the core's, not only what readers see).
        let seen = try store.write { transaction in try ["a", "b", "c"].map { try transaction.record(forKey: $0) } }
        #expect(seen == [a, b, nil])
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(try reopened.record(forKey: "a") == a)
        #expect(try reopened.record(forKey: "c") == nil)
    }

    // Mutants caught: the replaced record taken as none (a blind write counted as an insert); the
    // records not put back after a refused commit (its counts then drift from the model).
    @Test(arguments: [11 as UInt64, 12])
    func countsFollowRandomTransactionsExactly(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: seed)
        var store = try Store(at: dir.store, configuration: .testing())
        let digests = try (0 ..< 6).map { try store.put(Data("blob \($0)".utf8)) }
        let unknown = Digest.sha256(Data("never put".utf8))
        var model: [String: Record] = [:]
        for step in 0 ..< 300 {
            var next = model
            var refused = false
            try? store.write { transaction in
                for _ in 0 ... random.next() % 4 {
                    let key = "key/\(random.next() % 8)"
                    switch random.next() % 6 {
                    case 0: try transaction.removeRecord(forKey: key); next[key] = nil
                    case 1: if let same = next[key] { try transaction.setRecord(same, forKey: key) }  // unchanged
                    case 2 where random.next() % 5 == 0:
                        // A key nothing else sets, so no later change in the transaction replaces it.
                        try transaction.setRecord(Record(references: [unknown]), forKey: "refused")
                        refused = true
                    default:
                        // Duplicates and unsorted lists too: counts are of occurrences.
                        let references = (0 ..< random.next() % 4).map { _ in digests[Int(random.next() % 6)] }
                        let record = Record(value: Data("\(random.next() % 3)".utf8), references: references)
                        try transaction.setRecord(record, forKey: key)
                        next[key] = record
                    }
                }
            }
            if !refused { model = next }
            for digest in digests {
                let expected = model.values.reduce(0) { $0 + $1.references.filter { $0 == digest }.count }
                #expect(store.refCount(of: digest) == expected, "step \(step)")
            }
            if step % 100 == 99 {
                try store.close()
                store = try Store(at: dir.store, configuration: .testing())
            }
        }
        for key in (0 ..< 8).map({ "key/\($0)" }) { #expect(try store.record(forKey: key) == model[key]) }
    }
}
