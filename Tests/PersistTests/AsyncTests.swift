import ContentStore
import Foundation
import Testing
@testable import Persist

/// The async twins: the same semantics as the blocking methods, and `Store`'s cancellation rules.
@Suite struct AsyncTests {
    @Test func theTwinsDoWhatTheBlockingMethodsDo() async throws {
        let fixture = try Fixture()
        let persister = fixture.persister
        let parent = Item(label: "parent"), child = Item(label: "child")
        let result = try await persister.write("add") { transaction in
            try transaction.save(parent)
            try transaction.save(child)
            try transaction.relate(parent.id, to: child.id, as: "child")
            return "done"
        }
        #expect(result == "done")
        #expect(try await persister.fetch(Item.self, id: parent.id) == parent)
        #expect(try await persister.fetchAll(Item.self).count == 2)
        #expect(try await persister.related(Item.self, from: parent.id, as: "child") == [child])
        #expect(try await persister.read { try $0.fetch(Item.self, id: child.id) } == child)
        #expect(try await persister.undo()?.actionName == "add")
        #expect(try await persister.fetchAll(Item.self).isEmpty)
        #expect(try await persister.redo()?.actionName == "add")
        #expect(try await persister.history().cursor == 1)
        try await persister.pruneHistory(keepingLast: 0)
        #expect(try await persister.history().steps.isEmpty)
        #expect(try await persister.undo() == nil)
        await #expect(throws: PersistError.self) { try await persister.related(Item.self, from: parent.id, as: "") }
    }

    @Test func aTaskCancelledBeforeItsWriteStartsCommitsNothing() async throws {
        let fixture = try Fixture()
        let persister = fixture.persister
        try await persister.write { try $0.save(Item(label: "one")) }
        let write = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await persister.write { try $0.save(Item(label: "two")) }
        }
        await #expect(throws: CancellationError.self) { try await write.value }
        let undo = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await persister.undo()
        }
        await #expect(throws: CancellationError.self) { try await undo.value }
        #expect(try await persister.fetchAll(Item.self).map(\.label) == ["one"])
        #expect(try await persister.history().cursor == 1)
    }
}
