import ContentStore
import Foundation
import Testing
@testable import Persist

/// A write, undo or redo takes the head this process last wrote from memory only when it builds
/// on that very commit: any other commit in between (a prune, another writer, a raw write of the
/// head) makes it read the head again.
@Suite struct KnownHeadTests {
    @Test func aHeadRewrittenByAnotherCommitIsReadAgain() async throws {
        try await onOwnThread {
            let fixture = try Fixture()
            let persister = fixture.persister, store = fixture.store
            try persister.write("A") { try $0.save(Item(label: "a")) }
            let afterA = try #require(try store.record(forKey: persister.layout.head))
            try persister.write("B") { try $0.save(Item(label: "b")) }
            // Put the head back as it was after A: step 2 is no longer in the history.
            try store.write { try $0.setRecord(afterA, forKey: persister.layout.head) }
            try persister.write("C") { try $0.save(Item(label: "c")) }
            let history = try persister.history()
            #expect(history.steps.map(\.actionName) == ["A", "C"])
            #expect(history.cursor == 2)
            #expect(try persister.head().changeCount == 2)
        }
    }

    /// The head is taken across raw commits of other keys (the store remembers they did not change
    /// it), and read again after one that did, with unrelated commits around it.
    // Mutant caught: the store's memory of recent commits ignoring their keys (the rewritten head
    // would be taken from memory, and step B kept).
    @Test func rawCommitsBetweenWritesAreSeenOnlyWhenTheyChangeTheHead() async throws {
        try await onOwnThread {
            let fixture = try Fixture()
            let persister = fixture.persister, store = fixture.store
            func rawCommit(_ label: String) throws {
                try store.write { try $0.setRecord(Record(value: Data(label.utf8)), forKey: "raw/\(label)") }
            }
            try persister.write("A") { try $0.save(Item(label: "a")) }
            let afterA = try #require(try store.record(forKey: persister.layout.head))
            try rawCommit("1")
            try persister.write("B") { try $0.save(Item(label: "b")) }
            try rawCommit("2")
            try store.write { try $0.setRecord(afterA, forKey: persister.layout.head) }
            try rawCommit("3")
            try persister.write("C") { try $0.save(Item(label: "c")) }
            try rawCommit("4")
            try rawCommit("5")
            try persister.write("D") { try $0.save(Item(label: "d")) }
            try rawCommit("6")
            #expect(try persister.undo()?.actionName == "D")
            try rawCommit("7")
            #expect(try persister.redo()?.actionName == "D")
            try rawCommit("8")
            #expect(try persister.undo()?.actionName == "D")
            #expect(try persister.undo()?.actionName == "C")
            let history = try persister.history()
            #expect(history.steps.map(\.actionName) == ["A", "C", "D"])
            #expect(history.cursor == 1)
            #expect(try persister.head().changeCount == 7)
            // B's item stays: its step left the history with the head put back, not undone.
            #expect(Set(try persister.fetchAll(Item.self).map(\.label)) == ["a", "b"])
        }
    }

    @Test func aPruneBetweenWritesIsSeen() async throws {
        try await onOwnThread {
            let fixture = try Fixture()
            let persister = fixture.persister
            for label in ["A", "B", "C"] { try persister.write(label) { try $0.save(Item(label: label)) } }
            try persister.pruneHistory(keepingLast: 1)
            try persister.write("D") { try $0.save(Item(label: "d")) }
            #expect(try persister.history().steps.map(\.actionName) == ["C", "D"])
            #expect(try persister.undo()?.actionName == "D")
            #expect(try persister.undo()?.actionName == "C")
            #expect(try persister.undo() == nil)
        }
    }

    @Test func writersOnTwoThreadsAndTwoPersistersNumberEveryStepOnce() async throws {
        try await onOwnThread {
            let fixture = try Fixture()
            let persisters = [fixture.persister, try Persister(store: fixture.store)]
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for index in 0 ..< 25 {
                    try? persisters[thread % 2].write("\(thread)-\(index)") { try $0.save(Item(label: "\(thread)-\(index)")) }
                }
            }
            let history = try fixture.persister.history()
            #expect(history.steps.count == 100)
            #expect(Set(history.steps.map(\.sequence)) == Set(1 ... 100))
            #expect(try fixture.persister.head().changeCount == 100)
            #expect(try fixture.persister.fetchAll(Item.self).count == 100)
            for _ in 0 ..< 100 { #expect(try fixture.persister.undo() != nil) }
            #expect(try fixture.persister.fetchAll(Item.self).isEmpty)
        }
    }
}
