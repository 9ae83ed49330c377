import ContentStore
import Foundation
import Testing
@testable import Sync

@Suite("Sync: record layout")
struct RecordLayoutTests {
    @Test(arguments: [("notes", "1"), ("", "x"), ("a/b", "c/d"), ("3:x", ":"), ("é", "../é"), ("c", "")])
    func placesRoundTrip(container: String, id: String) throws {
        let place = Keys.place(container: container, id: id)
        let parsed = try #require(Keys.parse(place: place))
        #expect(parsed.container == container)
        #expect(parsed.id == id)
        #expect(place.hasPrefix(Keys.place(container: container, id: "")))
    }

    @Test(arguments: [UInt64(0), 1, 9, 10, 99, 12345, 99999, UInt64.max - 1])
    func sequencePrefixesCoverExactlyTheLaterRevisions(after revision: UInt64) {
        let prefixes = Keys.serverSequencePrefixes(after: revision)
        #expect(prefixes == prefixes.sorted())
        for candidate in [revision, revision &+ 1, revision &+ 9, revision &+ 10, revision &+ 1000, revision / 2, UInt64.max] {
            let key = Keys.serverSequence(candidate)
            let covered = prefixes.contains { key.hasPrefix($0) }
            #expect(covered == (candidate > revision), "\(candidate) after \(revision)")
        }
    }

    @Test func recordsRoundTrip() throws {
        let digest = Digest.sha256(Data("a".utf8)), other = Digest.sha256(Data("b".utf8))
        let object = StoredObject(container: "c", id: "i", revision: 7, isDeleted: false, author: "client",
                                  body: digest, attachments: ["z": other, "a": digest])
        #expect(try StoredObject(object.record, container: "c", id: "i", key: "k") == object)
        #expect(object.record.references == [digest, digest, other])
        let tombstone = StoredObject.tombstone(container: "c", id: "i", revision: 8, author: "")
        #expect(try StoredObject(tombstone.record, container: "c", id: "i", key: "k") == tombstone)
        let conflict = StoredConflict(local: object, server: tombstone, reason: .rejected(status: 413, message: "too big"))
        #expect(try StoredConflict(conflict.record, container: "c", id: "i", key: "k") == conflict)
        var truncated = object.record
        truncated.value.removeLast()
        #expect(throws: StoreError.self) { try StoredObject(truncated, container: "c", id: "i", key: "k") }
    }
}
