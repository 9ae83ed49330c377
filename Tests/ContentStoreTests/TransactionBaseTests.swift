import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A transaction knows the commit its base is the state after, and takes a record the caller
/// knows from that commit without a lookup, but only from exactly that commit.
@Suite(.blocking) struct TransactionBaseTests {
    @Test func theBaseSequenceCountsTheCommitsBeforeIt() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        #expect(try store.write { $0.baseSequence } == 0)
        try store.write { try $0.setRecord(Record(value: Data("1".utf8)), forKey: "k") }
        try store.write { _ in }  // commits nothing
        #expect(try store.write { $0.baseSequence } == 1)
        try store.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "k") }
        #expect(try store.write { $0.baseSequence } == 2)
    }

    @Test func aKnownRecordIsTakenOnlyForItsOwnCommit() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let stored = Record(value: Data("stored".utf8))
        // Not what the store holds: seeing it returned proves no lookup was made.
        let known = Record(value: Data("known".utf8))
        try store.write { try $0.setRecord(stored, forKey: "k") }
        try store.write { transaction in
            #expect(try transaction.record(forKey: "k", known: known, afterCommit: 1) == known)
            #expect(try transaction.record(forKey: "k", known: known, afterCommit: 0) == stored)
            #expect(try transaction.record(forKey: "k", known: known, afterCommit: 2) == stored)
            let pending = Record(value: Data("pending".utf8))
            try transaction.setRecord(pending, forKey: "k")
            #expect(try transaction.record(forKey: "k", known: known, afterCommit: 1) == pending)
            #expect(throws: StoreError.self) { try transaction.record(forKey: "", known: known, afterCommit: 1) }
        }
    }
}
