import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A record known as of an earlier commit is taken without a lookup across later commits that did
/// not change its key, as far as the store remembers them, and looked up otherwise. The known record
/// is deliberately not what the store holds: seeing it come back proves no lookup was made.
@Suite(.blocking) struct RecentCommitsTests {
    let stored = Record(value: Data("stored".utf8))
    let known = Record(value: Data("known".utf8))

    /// A fresh store whose commit 1 sets `stored` under "k".
    func storeWithK(_ dir: TemporaryDirectory) throws -> Store {
        let store = try Store(at: dir.store, configuration: .testing())
        try store.write { try $0.setRecord(stored, forKey: "k") }
        return store
    }

    /// Commits `count` transactions, each setting one other key to a new value.
    func commitOthers(_ count: Int, to store: Store) throws {
        for index in 0 ..< count {
            try store.write { try $0.setRecord(Record(value: Data(UUID().uuidString.utf8)), forKey: "other/\(index % 3)") }
        }
    }

    func read(_ store: Store, afterCommit sequence: UInt64) throws -> Record? {
        try store.write { try $0.record(forKey: "k", known: known, afterCommit: sequence) }
    }

    // Mutant caught: a known record taken only when the base is exactly its commit (§41's rule).
    @Test func aKnownRecordIsTakenAcrossUnrelatedCommits() throws {
        let dir = TemporaryDirectory()
        let store = try storeWithK(dir)
        try commitOthers(5, to: store)
        try store.write { try $0.setRecord(stored, forKey: "k") }  // an unchanged rewrite commits nothing
        #expect(try store.write { $0.baseSequence } == 6)
        #expect(try read(store, afterCommit: 1) == known)
    }

    // Mutant caught: commits remembered without their keys (any remembered commit taken as unrelated).
    @Test(arguments: [false, true])
    func aCommitThatChangedTheKeyRefusesIt(removing: Bool) throws {
        let dir = TemporaryDirectory()
        let store = try storeWithK(dir)
        try commitOthers(2, to: store)
        let changed = Record(value: Data("changed".utf8))
        try store.write { transaction in
            if removing { try transaction.removeRecord(forKey: "k") } else { try transaction.setRecord(changed, forKey: "k") }
            try transaction.setRecord(Record(), forKey: "other/x")
        }
        try commitOthers(2, to: store)
        #expect(try read(store, afterCommit: 1) == (removing ? nil : changed))
        // Known as of the commit that changed it, it is taken again.
        #expect(try read(store, afterCommit: 4) == known)
    }

    // Mutants caught: the memory's bound off by one either way; no bound (a slot reused by a later
    // commit taken for the commit it held before).
    @Test func aKnownRecordOlderThanTheMemoryIsLookedUp() throws {
        let dir = TemporaryDirectory()
        let store = try storeWithK(dir)
        try commitOthers(RecentCommits.capacity - 1, to: store)
        #expect(try read(store, afterCommit: 1) == known)
        try commitOthers(1, to: store)
        // Commit 1 is now the one just before the oldest remembered: still unchanged since.
        #expect(try read(store, afterCommit: 1) == known)
        try commitOthers(1, to: store)
        #expect(try read(store, afterCommit: 1) == stored)
        #expect(try read(store, afterCommit: 2) == known)
    }

    // Mutant caught: a commit of more keys than are remembered taken as changing none.
    @Test func aCommitOfManyKeysRefusesEveryKnownRecord() throws {
        let dir = TemporaryDirectory()
        let store = try storeWithK(dir)
        try store.write { transaction in
            for index in 0 ... RecentCommits.keysPerCommit { try transaction.setRecord(Record(), forKey: "many/\(index)") }
        }
        #expect(try read(store, afterCommit: 1) == stored)
    }

    // Mutant caught: a memory that starts full (of commits it never saw) when loaded from a checkpoint.
    @Test func aStoreReopenedRemembersOnlyTheCommitsSinceItsCheckpoint() throws {
        let dir = TemporaryDirectory()
        var store = try storeWithK(dir)
        try store.checkpoint()
        try store.close()
        store = try Store(at: dir.store, configuration: .testing())
        try commitOthers(1, to: store)
        #expect(try read(store, afterCommit: 0) == stored)
        #expect(try read(store, afterCommit: 1) == known)
    }
}
