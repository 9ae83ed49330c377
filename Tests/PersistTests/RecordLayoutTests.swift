import ContentStore
import Foundation
import Testing
@testable import Persist
import TestThreads

/// The byte layout Docs/persist.md gives, as known answers, and what malformed values become.
@Suite(.blocking) struct RecordLayoutTests {
    @Test func recordsEncodeAsDocumented() throws {
        let body = Digest.sha256(Data("{}".utf8))
        let entity = EntityRecord(entityName: "Budget", body: body).record
        #expect([UInt8](entity.value) == [0x01, 0x45, 0x06, 0, 0, 0, 0x42, 0x75, 0x64, 0x67, 0x65, 0x74])
        #expect(entity.references == [body])
        let relation = RelationRecord(cascadeDelete: true, order: 7, index: 0).record
        #expect([UInt8](relation.value) == [0x01, 0x52, 0x01, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(try RelationRecord(relation, key: "k") == RelationRecord(cascadeDelete: true, order: 7, index: 0))
        var head = Head()
        head.changeCount = 3
        #expect(try Head(head.record, key: "k") == head)
    }

    /// A save reads the stored entity record by comparing its bytes with the name it expects, and
    /// one that replaces the entity shares the stored value (the name's bytes): the record is still
    /// the one a fresh save writes, with the new body as its one reference.
    @Test func aReplacedEntityKeepsItsRecordsLayout() throws {
        let fixture = try Fixture()
        let first = Item(id: UUID.numbered(1), label: "first"), second = Item(id: UUID.numbered(1), label: "second", amount: 2)
        try fixture.persister.write { try $0.save(first) }
        try fixture.persister.write { try $0.save(second) }
        let stored = try #require(try fixture.store.record(forKey: Layout(name: "default").entity(first.id)))
        let body = Digest.sha256(try BodyCoding.encode(second))
        #expect(stored == EntityRecord(entityName: Item.entityName, body: body).record)
        #expect(stored.references == [body])
        #expect(try fixture.persister.fetch(Item.self, id: first.id) == second)
        // A name of the same length is still another name: recognized by every byte, not the length.
        #expect { try fixture.persister.write { try $0.save(Itex(id: first.id)) } } throws: { error in
            guard case PersistError.typeMismatch(_, let expected, let found) = error else { return false }
            return expected == "Itex" && found == "Item"
        }
    }

    struct Itex: Entity {
        static let entityName = "Itex"
        var id: UUID
    }

    @Test func keysKeepPersistersApart() {
        let layout = Layout(name: "a/b%c")
        #expect(layout.prefix == "persist/a%2Fb%25c/")
        #expect(layout.head == "persist/a%2Fb%25c/head")
        #expect(layout.entity(UUID.numbered(1)) == "persist/a%2Fb%25c/e/" + UUID.numbered(1).uuidString)
        let source = UUID.numbered(1), target = UUID.numbered(2)
        #expect(layout.parse(layout.relation(from: source, to: target, as: "x/y")) == .relation(source: source, relation: "x/y", target: target))
        #expect(layout.parse(layout.backlink(from: source, to: target, as: "%2F")) == .backlink(target: target, source: source, relation: "%2F"))
        #expect(layout.step(255) == "persist/a%2Fb%25c/s/00000000000000ff")
        #expect(layout.step(0x0123_4567_89AB_CDEF) == "persist/a%2Fb%25c/s/0123456789abcdef")
        #expect(layout.step(.max) == "persist/a%2Fb%25c/s/ffffffffffffffff")
    }

    /// Keys and bodies hold a UUID as `uuidString` writes it: stored keys and bodies of earlier
    /// versions must be found and compared byte for byte. Known answers, every nibble value in
    /// every position, and random IDs.
    @Test func uuidTextIsUUIDString() {
        #expect(UUID(uuid: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)).text == "00010203-0405-0607-0809-0A0B0C0D0E0F")
        #expect(UUID(uuid: (255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240)).text
            == "FFFEFDFC-FBFA-F9F8-F7F6-F5F4F3F2F1F0")
        for nibble in UInt8(0) ... 15 {
            let byte = nibble << 4 | (15 - nibble)
            let id = UUID(uuid: (byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte, byte))
            #expect(id.text == id.uuidString)
        }
        for _ in 0 ..< 1_000 {
            let id = UUID()
            #expect(id.text == id.uuidString)
        }
        let layout = Layout(name: "n")
        let id = UUID()
        #expect(layout.entity(id) == "persist/n/e/" + id.uuidString)
        #expect(layout.parse(layout.entity(id)) == .entity(id))
    }

    @Test func malformedValuesAreCorruptedAndNewerVersionsUnsupported() throws {
        func code(_ bytes: [UInt8]) -> StoreError.Code? {
            do {
                _ = try EntityRecord(Record(value: Data(bytes), references: [Digest.sha256(Data())]), key: "persist/x/e/1")
                return nil
            } catch let error as StoreError {
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code([0x01, 0x45, 0x06, 0, 0, 0, 0x42]) == .corrupted)          // truncated
        #expect(code([0x01, 0x52, 0x00, 0, 0, 0]) == .corrupted)                // another kind
        #expect(code([0x01, 0x45, 0x00, 0, 0, 0, 0xFF]) == .corrupted)          // trailing bytes
        #expect(code([0x02, 0x45, 0x00, 0, 0, 0]) == .unsupportedFormat)        // a newer format
        #expect(code([0x01, 0x45, 0x00, 0, 0, 0]) == nil)
    }

    @Test func stepsKeepSmallDiffsInlineAndLargeOnesAsBlobs() throws {
        let body = Digest.sha256(Data("body".utf8))
        let step = UndoStep(sequence: 3, actionName: "Edit", date: Date(timeIntervalSinceReferenceDate: 1.5))
        let inline = StepRecord(step: step, diff: .inline(Data([0x01, 0x44, 0, 0, 0, 0])), bodies: [body])
        let record = inline.record
        #expect(record.value.first == StepRecord.inlineVersion)
        #expect(record.value.suffix(10) == Data([6, 0, 0, 0, 0x01, 0x44, 0, 0, 0, 0]))  // u32 length, the diff
        #expect(record.references == [body])
        #expect(try StepRecord(record, key: "k") == inline)
        let diffDigest = Digest.sha256(Data("diff".utf8))
        let blob = StepRecord(step: step, diff: .blob(diffDigest), bodies: [body])
        #expect(blob.record.value.first == RecordFormat.version)
        #expect(blob.record.references == [diffDigest, body])
        #expect(try StepRecord(blob.record, key: "k") == blob)
        var newer = [UInt8](record.value)
        newer[0] = 3
        #expect(throws: StoreError.self) { try StepRecord(Record(value: Data(newer), references: []), key: "k") }
    }

    /// Steps written before diffs were kept inline (format 1: the diff a blob of its own) still
    /// undo and redo, before and after a reopen, and new steps beside them are inline.
    @Test func stepsOfTheFirstFormatStillUndoAndRedo() throws {
        let fixture = try Fixture()
        let first = Item(label: "first"), second = Item(label: "second")
        try fixture.persister.write("one") { try $0.save(first) }
        try fixture.persister.write("two") { try $0.save(second) }
        let layout = Layout(name: "default")
        // Rewrite both steps as the first format wrote them.
        try fixture.store.write { transaction in
            for position: UInt64 in [1, 2] {
                let key = layout.step(position)
                var stored = try StepRecord(#require(try transaction.record(forKey: key)), key: key)
                guard case .inline(let bytes) = stored.diff else { Issue.record("step \(position) is not inline"); return }
                stored.diff = .blob(try fixture.store.put(bytes))
                #expect(stored.record.value.first == RecordFormat.version)
                try transaction.setRecord(stored.record, forKey: key)
            }
        }
        try fixture.reopen()
        #expect(try fixture.persister.undo()?.actionName == "two")
        #expect(try fixture.persister.fetch(Item.self, id: second.id) == nil)
        #expect(try fixture.persister.undo()?.actionName == "one")
        #expect(try fixture.persister.fetch(Item.self, id: first.id) == nil)
        #expect(try fixture.persister.redo()?.actionName == "one")
        try fixture.reopen()
        #expect(try fixture.persister.redo()?.actionName == "two")
        #expect(try fixture.persister.fetchAll(Item.self).count == 2)
        #expect(try fixture.persister.undo()?.actionName == "two")
        try fixture.persister.write("three") { try $0.save(Item(label: "third")) }
        let third = try #require(try fixture.store.record(forKey: layout.step(2)))
        #expect(third.value.first == StepRecord.inlineVersion)
        #expect(try fixture.persister.history().steps.map(\.actionName) == ["one", "three"])
    }

    @Test func diffsRoundTrip() throws {
        let digest = Digest.sha256(Data("body".utf8)), other = Digest.sha256(Data("other".utf8))
        let diff = Diff(changes: [
            .init(key: "persist/d/e/1", before: nil, after: Record(value: Data([1, 2]), references: [digest, digest])),
            // One reference (an entity's record): written and listed without the references array.
            .init(key: "persist/d/e/2", before: Record(value: Data([3]), references: [other]), after: Record(value: Data([4]), references: [digest])),
            .init(key: "persist/d/t/x/1", before: Record(), after: nil),
        ])
        #expect(try Diff(diff.blob, key: "k") == diff)
        #expect(diff.digests == [digest, other].sorted())
        #expect(throws: StoreError.self) { try Diff(diff.blob.dropLast(), key: "k") }
    }
}
