import ContentStore
import Foundation
import Testing
@testable import Persist

/// `changes()`: every write, undo and redo, in commit order, once each, to every persister opened
/// on the same store and name; nothing for no-op writes, failed writes or other names.
@Suite struct ChangeTests {
    @Test func changesArriveInOrderWithTheirKindStepAndEntities() async throws {
        let fixture = try Fixture()
        let other = try Persister(store: fixture.store, name: "default")
        let unrelated = try Persister(store: fixture.store, name: "other")
        var changes = fixture.persister.changes().makeAsyncIterator()
        var seenByOther = other.changes().makeAsyncIterator()
        var unrelatedChanges = unrelated.changes().makeAsyncIterator()

        let parent = Item(label: "parent"), child = Item(label: "child")
        try await fixture.persister.write("add") { transaction in
            try transaction.save(parent)
            try transaction.save(child)
        }
        try await other.write("relate") { try $0.relate(parent.id, to: child.id, as: "child") }
        try await fixture.persister.write("no-op") { try $0.save(parent) }
        _ = try? await fixture.persister.write("fails") { try $0.relate(parent.id, to: UUID(), as: "child") }
        try await fixture.persister.undo()
        try await other.redo()
        try await unrelated.write("elsewhere") { try $0.save(Tag(name: "t")) }

        let expected: [(PersistChange.Kind, String, Set<UUID>)] = [
            (.write, "add", [parent.id, child.id]),
            (.write, "relate", [parent.id, child.id]),
            (.undo, "relate", [parent.id, child.id]),
            (.redo, "relate", [parent.id, child.id]),
        ]
        for (kind, name, changed) in expected {
            let change = try #require(await changes.next())
            #expect(change.kind == kind && change.step.actionName == name && change.changed == changed)
            #expect(await seenByOther.next() == change)
        }
        #expect(await unrelatedChanges.next()?.step.actionName == "elsewhere")
        // The history agrees with what was delivered.
        #expect(try await fixture.persister.history().steps.map(\.actionName) == ["add", "relate"])
    }

    @Test func concurrentWritersAreDeliveredInCommitOrder() async throws {
        let fixture = try Fixture()
        let persister = fixture.persister
        let stream = persister.changes()
        let writers = 4, writesEach = 25
        await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0 ..< writers {
                group.addTask {
                    for index in 0 ..< writesEach {
                        try await persister.write("\(writer)-\(index)") { try $0.save(Item(label: "\(writer)-\(index)")) }
                    }
                }
            }
        }
        let steps = try await persister.history().steps
        #expect(steps.count == writers * writesEach)
        var delivered: [UndoStep] = []
        for await change in stream {
            delivered.append(change.step)
            if delivered.count == steps.count { break }
        }
        // Commit order is the history's order.
        #expect(delivered == steps)
    }

    @Test func theStreamEndsWhenTheLastPersisterGoes() async throws {
        let fixture = try Fixture()
        var persister: Persister? = try Persister(store: fixture.store, name: "short-lived")
        let stream = try #require(persister).changes()
        try await persister?.write { try $0.save(Item(label: "x")) }
        persister = nil
        var count = 0
        for await _ in stream { count += 1 }
        #expect(count == 1)
    }
}
