import ContentStore
import Foundation
import Testing
@testable import Persist
import TestThreads

@Suite(.blocking) struct PersisterTests {
    @Test func savedEntitiesAreFetchedByIDAndAllSortedByID() throws {
        let fixture = try Fixture()
        let ids = [UUID.numbered(3), .numbered(1), .numbered(2)]
        try fixture.persister.write { transaction in
            for (index, id) in ids.enumerated() { try transaction.save(Item(id: id, label: "item \(index)")) }
            try transaction.save(Tag(id: .numbered(9), name: "tag"))
        }
        #expect(try fixture.persister.fetch(Item.self, id: .numbered(3))?.label == "item 0")
        #expect(try fixture.persister.fetch(Item.self, id: UUID()) == nil)
        #expect(try fixture.persister.fetchAll(Item.self).map(\.id) == [.numbered(1), .numbered(2), .numbered(3)])
        #expect(try fixture.persister.fetchAll(Tag.self).map(\.name) == ["tag"])
    }

    @Test func datesAndDoublesKeepFullPrecision() throws {
        let fixture = try Fixture()
        let date = Date(timeIntervalSinceReferenceDate: 801_234_567.123_456_789_1)
        let item = Item(label: "precise", amount: 0.1 + 0.2, date: date)
        try fixture.persister.write { try $0.save(item) }
        try fixture.reopen()
        let fetched = try #require(try fixture.persister.fetch(Item.self, id: item.id))
        #expect(fetched.date == date)
        #expect(fetched.amount == 0.1 + 0.2)
    }

    @Test func aTransactionSeesItsOwnWrites() throws {
        let fixture = try Fixture()
        let parent = Item(label: "parent"), child = Item(label: "child")
        try fixture.persister.write { transaction in
            try transaction.save(parent)
            try transaction.save(child)
            #expect(try transaction.fetch(Item.self, id: parent.id) == parent)
            try transaction.relate(parent.id, to: child.id, as: "child")
            #expect(try transaction.related(Item.self, from: parent.id, as: "child") == [child])
            try transaction.delete(Item.self, id: child.id)
            #expect(try transaction.fetch(Item.self, id: child.id) == nil)
            #expect(try transaction.related(Item.self, from: parent.id, as: "child") == [])
            #expect(try transaction.fetchAll(Item.self) == [parent])
        }
    }

    @Test func relatedKeepsRelateOrderAcrossWrites() throws {
        let fixture = try Fixture()
        let parent = Item(label: "parent")
        let children = (0 ..< 5).map { Item(id: .numbered(UInt8(10 - $0)), label: "child \($0)") }
        try fixture.persister.write { transaction in
            try transaction.save(parent)
            for child in children { try transaction.save(child) }
            for child in children.prefix(3) { try transaction.relate(parent.id, to: child.id, as: "child") }
        }
        try fixture.persister.write { transaction in
            for child in children.suffix(2) { try transaction.relate(parent.id, to: child.id, as: "child") }
            // Relating again keeps the place.
            try transaction.relate(parent.id, to: children[0].id, as: "child", cascadeDelete: true)
        }
        #expect(try fixture.persister.related(Item.self, from: parent.id, as: "child") == children)
        // Unrelated and related again in one write: no net change, no step.
        let steps = try fixture.persister.history().steps.count
        try fixture.persister.write { transaction in
            try transaction.unrelate(parent.id, from: children[1].id, as: "child")
            try transaction.relate(parent.id, to: children[1].id, as: "child")
        }
        #expect(try fixture.persister.related(Item.self, from: parent.id, as: "child") == children)
        #expect(try fixture.persister.history().steps.count == steps)
        // In separate writes it moves to the end.
        try fixture.persister.write { try $0.unrelate(parent.id, from: children[1].id, as: "child") }
        try fixture.persister.write { try $0.relate(parent.id, to: children[1].id, as: "child") }
        #expect(try fixture.persister.related(Item.self, from: parent.id, as: "child").map(\.label)
            == ["child 0", "child 2", "child 3", "child 4", "child 1"])
    }

    @Test func deleteRemovesRelationsFromAndToTheEntityAndCascades() throws {
        let fixture = try Fixture()
        let root = Item(label: "root"), a = Item(label: "a"), b = Item(label: "b"), c = Item(label: "c"), other = Item(label: "other")
        let tag = Tag(name: "tag")
        try fixture.persister.write { transaction in
            for item in [root, a, b, c, other] { try transaction.save(item) }
            try transaction.save(tag)
            try transaction.relate(root.id, to: a.id, as: "child", cascadeDelete: true)
            try transaction.relate(a.id, to: b.id, as: "child", cascadeDelete: true)
            try transaction.relate(b.id, to: root.id, as: "child", cascadeDelete: true)   // a cycle
            try transaction.relate(a.id, to: c.id, as: "child")                           // no cascade
            try transaction.relate(other.id, to: a.id, as: "child")
            try transaction.relate(a.id, to: tag.id, as: "tag")
        }
        try fixture.persister.write { try $0.delete(Item.self, id: root.id) }
        #expect(try fixture.persister.fetchAll(Item.self).map(\.label).sorted() == ["c", "other"])
        #expect(try fixture.persister.fetchAll(Tag.self) == [tag])
        #expect(try fixture.persister.related(Item.self, from: other.id, as: "child") == [])
        // No relation records are left behind.
        let layout = fixture.persister.layout
        #expect(try fixture.store.keys(withPrefix: layout.prefix + "r/").isEmpty)
        #expect(try fixture.store.keys(withPrefix: layout.prefix + "b/").isEmpty)
        // One undo brings the whole cascade back.
        try fixture.persister.undo()
        #expect(try fixture.persister.fetchAll(Item.self).count == 5)
        #expect(try fixture.persister.related(Item.self, from: other.id, as: "child") == [a])
        #expect(try fixture.persister.related(Item.self, from: a.id, as: "child") == [b, c])
        #expect(try fixture.persister.related(Tag.self, from: a.id, as: "tag") == [tag])
    }

    @Test func undoAndRedoMoveThroughTheHistory() throws {
        let fixture = try Fixture()
        var item = Item(label: "v1")
        try fixture.persister.write("Create") { try $0.save(item) }
        fixture.clock.advance(by: 1.5)
        item.label = "v2"
        try fixture.persister.write("Rename") { try $0.save(item) }
        #expect(fixture.persister.canUndo && !fixture.persister.canRedo)

        let undone = try #require(try fixture.persister.undo())
        #expect(undone.actionName == "Rename")
        #expect(undone.date == fixture.clock.now)
        #expect(try fixture.persister.fetch(Item.self, id: item.id)?.label == "v1")
        #expect(fixture.persister.canUndo && fixture.persister.canRedo)
        #expect(try fixture.persister.undo()?.actionName == "Create")
        #expect(try fixture.persister.fetch(Item.self, id: item.id) == nil)
        #expect(try fixture.persister.undo() == nil)
        #expect(try fixture.persister.redo() != nil)
        #expect(try fixture.persister.redo() == undone)
        #expect(try fixture.persister.redo() == nil)
        #expect(try fixture.persister.fetch(Item.self, id: item.id)?.label == "v2")

        let history = try fixture.persister.history()
        #expect(history.steps.map(\.actionName) == ["Create", "Rename"])
        #expect(history.cursor == 2)
        #expect(history.steps[0].sequence < history.steps[1].sequence)
    }

    @Test func aNoOpWriteRecordsNoStepAndKeepsTheRedoSteps() throws {
        let fixture = try Fixture()
        let item = Item(label: "one")
        try fixture.persister.write { try $0.save(item) }
        try fixture.persister.write { try $0.save(Item(id: item.id, label: "two")) }
        try fixture.persister.undo()
        let result = try fixture.persister.write("nothing") { transaction in
            try transaction.save(item)   // as stored
            return 42
        }
        #expect(result == 42)
        #expect(fixture.persister.canRedo)
        #expect(try fixture.persister.history().steps.count == 2)
        // A write that changes something drops them.
        try fixture.persister.write("new") { try $0.save(Item(id: item.id, label: "three")) }
        #expect(!fixture.persister.canRedo)
        let history = try fixture.persister.history()
        #expect(history.steps.map(\.actionName) == [nil, "new"])
        #expect(history.cursor == 2)
        // Sequences are never reused.
        #expect(history.steps[1].sequence == 3)
    }

    @Test func aFailedWriteChangesNothing() throws {
        let fixture = try Fixture()
        let item = Item(label: "kept")
        try fixture.persister.write { try $0.save(item) }
        let missing = UUID()
        #expect {
            try fixture.persister.write { transaction in
                try transaction.save(Item(label: "not kept"))
                try transaction.relate(item.id, to: missing, as: "child")
            }
        } throws: { error in
            guard case PersistError.unknownEntity(let id) = error else { return false }
            return id == missing
        }
        struct Thrown: Error {}
        #expect(throws: Thrown.self) {
            try fixture.persister.write { transaction in
                try transaction.delete(Item.self, id: item.id)
                throw Thrown()
            }
        }
        #expect(try fixture.persister.fetchAll(Item.self) == [item])
        #expect(try fixture.persister.history().steps.count == 1)
    }

    @Test func unknownEntitiesAndTypeMismatchesAreTypedErrors() throws {
        let fixture = try Fixture()
        let item = Item(label: "item"), tag = Tag(name: "tag")
        try fixture.persister.write { transaction in
            try transaction.save(item)
            try transaction.save(tag)
            try transaction.relate(item.id, to: tag.id, as: "tag")
        }
        func isMismatch(_ error: any Error, _ id: UUID, expected: String, found: String) -> Bool {
            guard case PersistError.typeMismatch(let i, let e, let f) = error else { return false }
            return i == id && e == expected && f == found
        }
        #expect { try fixture.persister.fetch(Tag.self, id: item.id) } throws: { isMismatch($0, item.id, expected: "Tag", found: "Item") }
        #expect { try fixture.persister.related(Item.self, from: item.id, as: "tag") } throws: { isMismatch($0, tag.id, expected: "Item", found: "Tag") }
        #expect { try fixture.persister.write { try $0.save(Tag(id: item.id, name: "x")) } } throws: { isMismatch($0, item.id, expected: "Tag", found: "Item") }
        #expect { try fixture.persister.write { try $0.delete(Tag.self, id: item.id) } } throws: { isMismatch($0, item.id, expected: "Tag", found: "Item") }
        let unknown = UUID()
        for body: (inout PersistTransaction) throws -> Void in [
            { try $0.delete(Item.self, id: unknown) },
            { try $0.relate(unknown, to: item.id, as: "child") },
            { try $0.unrelate(item.id, from: unknown, as: "child") },
        ] {
            #expect { try fixture.persister.write(nil, body) } throws: { error in
                guard case PersistError.unknownEntity(let id) = error else { return false }
                return id == unknown
            }
        }
        #expect(try fixture.persister.history().steps.count == 1)
    }

    @Test func anUndecodableBodyIsReported() throws {
        let fixture = try Fixture()
        let item = Item(label: "no mandatory field")
        try fixture.persister.write { try $0.save(item) }
        #expect { try fixture.persister.fetch(StrictItem.self, id: item.id) } throws: { error in
            guard case PersistError.undecodable(let entity, let id, _) = error else { return false }
            return entity == "Item" && id == item.id
        }
    }

    @Test func aRenamedSwiftTypeKeepsItsData() throws {
        let fixture = try Fixture()
        let item = Item(label: "old name", amount: 2.5, date: Date(timeIntervalSinceReferenceDate: 12.75))
        try fixture.persister.write { try $0.save(item) }
        try fixture.reopen()
        let renamed = try #require(try fixture.persister.fetch(RenamedItem.self, id: item.id))
        #expect(renamed == RenamedItem(id: item.id, label: "old name", amount: 2.5, date: item.date))
    }

    @Test(arguments: ["", "a\0b", String(repeating: "é", count: 129)])
    func invalidNamesAreRefused(name: String) throws {
        let fixture = try Fixture()
        let item = Item(label: "item")
        try fixture.persister.write { try $0.save(item) }
        func isInvalidName(_ error: any Error) -> Bool {
            guard case PersistError.invalidName(let found) = error else { return false }
            return found == name
        }
        #expect { try Persister(store: fixture.store, name: name) } throws: { isInvalidName($0) }
        #expect { try fixture.persister.write { try $0.relate(item.id, to: item.id, as: name) } } throws: { isInvalidName($0) }
        #expect { try fixture.persister.write { try $0.unrelate(item.id, from: item.id, as: name) } } throws: { isInvalidName($0) }
        #expect { try fixture.persister.related(Item.self, from: item.id, as: name) } throws: { isInvalidName($0) }
        #expect(try fixture.persister.history().steps.count == 1)
    }

    struct Nameless: Entity {
        static let entityName = ""
        var id = UUID()
    }

    @Test func anEntityWithAnInvalidNameIsRefused() throws {
        let fixture = try Fixture()
        func isInvalidName(_ error: any Error) -> Bool {
            guard case PersistError.invalidName("") = error else { return false }
            return true
        }
        #expect { try fixture.persister.write { try $0.save(Nameless()) } } throws: { isInvalidName($0) }
        #expect { try fixture.persister.fetchAll(Nameless.self) } throws: { isInvalidName($0) }
        #expect { try fixture.persister.fetch(Nameless.self, id: UUID()) } throws: { isInvalidName($0) }
        #expect(try fixture.persister.history().steps.isEmpty)
    }

    @Test func namesOfUpTo256BytesWithSlashesArePersistersOfTheirOwn() throws {
        let fixture = try Fixture()
        let longest = String(repeating: "x", count: 256)
        let names = ["default/e", "default%2Fe", "a/b", "a", longest, "%"]
        for (index, name) in names.enumerated() {
            let persister = try Persister(store: fixture.store, name: name)
            try persister.write { try $0.save(Item(id: .numbered(UInt8(index)), label: name)) }
            try persister.write { try $0.relate(.numbered(UInt8(index)), to: .numbered(UInt8(index)), as: "self/" + name.prefix(100)) }
        }
        try fixture.persister.write { try $0.save(Item(label: "default")) }
        for (index, name) in names.enumerated() {
            let persister = try Persister(store: fixture.store, name: name)
            #expect(try persister.fetchAll(Item.self).map(\.label) == [name])
            #expect(try persister.related(Item.self, from: .numbered(UInt8(index)), as: "self/" + name.prefix(100)).count == 1)
            #expect(try persister.history().steps.count == 2)
        }
        #expect(try fixture.persister.fetchAll(Item.self).map(\.label) == ["default"])
        #expect(try fixture.persister.history().steps.count == 1)
    }

    @Test func equalBodiesAreStoredOnce() throws {
        let fixture = try Fixture()
        let first = Item(id: .numbered(1), label: "same"), again = Item(id: .numbered(1), label: "same")
        try fixture.persister.write { try $0.save(first) }
        let before = try fixture.store.statistics().blobCount
        try fixture.persister.write { try $0.save(Item(id: .numbered(1), label: "changed")) }
        try fixture.persister.write { try $0.save(again) }
        // The last write's body is the first one's blob: only the new body was added (the two
        // steps' small diffs are inline in their step records).
        #expect(try fixture.store.statistics().blobCount == before + 1)
    }

    @Test func historySurvivesCloseAndReopen() throws {
        let fixture = try Fixture()
        let item = Item(label: "a")
        try fixture.persister.write("one") { try $0.save(item) }
        try fixture.persister.write("two") { try $0.save(Item(id: item.id, label: "b")) }
        try fixture.persister.write("three") { try $0.save(Item(id: item.id, label: "c")) }
        try fixture.persister.undo()
        try fixture.reopen()
        #expect(try fixture.persister.history().steps.map(\.actionName) == ["one", "two", "three"])
        #expect(try fixture.persister.history().cursor == 2)
        #expect(try fixture.persister.redo()?.actionName == "three")
        #expect(try fixture.persister.fetch(Item.self, id: item.id)?.label == "c")
        try fixture.persister.undo()
        try fixture.persister.undo()
        try fixture.persister.undo()
        #expect(try fixture.persister.fetchAll(Item.self).isEmpty)
    }

    @Test func pruneKeepsTheNewestSteps() throws {
        let fixture = try Fixture()
        let item = Item(label: "0")
        for round in 0 ..< 5 { try fixture.persister.write("\(round)") { try $0.save(Item(id: item.id, label: "\(round)")) } }
        try fixture.persister.undo()
        try fixture.persister.pruneHistory(keepingLast: 3)
        var history = try fixture.persister.history()
        #expect(history.steps.map(\.actionName) == ["2", "3", "4"])
        #expect(history.cursor == 2)
        #expect(try fixture.persister.undo()?.actionName == "3")
        #expect(try fixture.persister.undo()?.actionName == "2")
        #expect(try fixture.persister.undo() == nil)
        #expect(try fixture.persister.fetch(Item.self, id: item.id)?.label == "1")
        // A prune reaching past the first redo step drops every redo step.
        try fixture.persister.pruneHistory(keepingLast: 2)
        history = try fixture.persister.history()
        #expect(history.steps.isEmpty && history.cursor == 0)
        #expect(!fixture.persister.canUndo && !fixture.persister.canRedo)
        #expect(throws: StoreError.self) { try fixture.persister.pruneHistory(keepingLast: -1) }
    }
}
