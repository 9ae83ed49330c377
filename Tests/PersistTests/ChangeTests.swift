import ContentStore
import Foundation
import Synchronization
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

    /// A change next in order reaches the streams as its commit ends, though another commit of this
    /// process is still in flight: only a change whose predecessor has not come is held back.
    @Test func aChangeNextInOrderIsDeliveredWhileAnotherCommitIsInFlight() async throws {
        let fixture = try Fixture()
        let shared = fixture.persister.shared, layout = fixture.persister.layout
        let received = Mutex<[UInt64]>([])
        let stream = shared.changes()
        let reader = Task { for await change in stream { received.withLock { $0.append(change.step.sequence) } } }
        defer { reader.cancel() }
        func committed(_ number: UInt64) -> SharedState.Committed<Void> {
            var committed = SharedState.Committed(result: ())
            let step = UndoStep(sequence: number, actionName: nil, date: Date())
            committed.delivery.change = (number, SharedState.PendingChange(step: step, kind: .write, diff: Diff(changes: []), layout: layout))
            return committed
        }
        try await shared.committing { () async throws -> SharedState.Committed<Void> in
            try shared.committing { committed(1) }
            try shared.committing { committed(2) }
            let deadline = ContinuousClock.now + .seconds(10)
            while received.withLock({ $0.count }) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(received.withLock { $0 } == [1, 2])
            return SharedState.Committed(result: ())
        }
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
