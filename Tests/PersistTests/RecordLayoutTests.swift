import ContentStore
import Foundation
import Testing
@testable import Persist

/// The byte layout Docs/persist.md gives, as known answers, and what malformed values become.
@Suite struct RecordLayoutTests {
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

    @Test func keysKeepPersistersApart() {
        let layout = Layout(name: "a/b%c")
        #expect(layout.prefix == "persist/a%2Fb%25c/")
        let source = UUID.numbered(1), target = UUID.numbered(2)
        #expect(layout.parse(layout.relation(from: source, to: target, as: "x/y")) == .relation(source: source, relation: "x/y", target: target))
        #expect(layout.parse(layout.backlink(from: source, to: target, as: "%2F")) == .backlink(target: target, source: source, relation: "%2F"))
        #expect(layout.step(255) == "persist/a%2Fb%25c/s/00000000000000ff")
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

    @Test func diffsRoundTrip() throws {
        let digest = Digest.sha256(Data("body".utf8))
        let diff = Diff(changes: [
            .init(key: "persist/d/e/1", before: nil, after: Record(value: Data([1, 2]), references: [digest, digest])),
            .init(key: "persist/d/t/x/1", before: Record(), after: nil),
        ])
        #expect(try Diff(diff.blob, key: "k") == diff)
        #expect(diff.digests == [digest])
        #expect(throws: StoreError.self) { try Diff(diff.blob.dropLast(), key: "k") }
    }
}
