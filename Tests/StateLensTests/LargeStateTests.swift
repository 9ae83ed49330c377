import Foundation
import StateLens
import Testing
import TestThreads

struct Item: Codable, Sendable, Equatable {
    var id: Int
    var name: String
    var notes: String
    var flags: [Bool]
}

/// About 0.9 MB of canonical JSON.
struct Catalog: Codable, Sendable, Equatable {
    var version = 0
    var items: [Item] = []
    var index: [String: Int] = [:]

    static func large(count: Int = 1000) -> Catalog {
        var catalog = Catalog()
        for id in 0 ..< count {
            catalog.items.append(Item(id: id, name: "item \(id)", notes: String(repeating: "note \(id) ", count: 90), flags: [id % 2 == 0, true]))
            catalog.index["item \(id)"] = id
        }
        return catalog
    }
}

@Suite(.blocking) struct LargeStateTests {
    @Test func updatingOneFieldOfALargeStateStoresOnlyAFewSmallParts() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        try state.root.set(Catalog.large())
        let json = try JSONEncoder().encode(state.value)
        #expect(json.count > 800_000)
        let before = try fixture.store.statistics()
        try state.root.items.update { $0[500].name = "renamed" }
        try state.root.version.set(1)
        let after = try fixture.store.statistics()
        let added = after.logicalBytes - before.logicalBytes
        #expect(added < 64 * 1024, "one field's update stored \(added) bytes of a \(json.count)-byte state")
        let head = try #require(try fixture.store.record(forKey: "statelens/h/catalog"))
        #expect(head.references.count > 16, "the state is split into parts")
        #expect(head.value.count < 16 * 1024, "the head record holds references, not the state")

        try fixture.reopen()
        let reopened = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        var expected = Catalog.large()
        expected.items[500].name = "renamed"
        expected.version = 1
        #expect(reopened.value == expected)
    }

    @Test func insertingAnElementRestoresOnlyTheChunksAroundIt() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        try state.root.set(Catalog.large())
        let before = try fixture.store.statistics()
        try state.root.index.update { $0["inserted"] = -1 }
        let after = try fixture.store.statistics()
        #expect(after.logicalBytes - before.logicalBytes < 64 * 1024)
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: "catalog", default: Catalog()).value.index["inserted"] == -1)
    }

    @Test func aLargeStateIsReadBackExactlyAfterManyRandomEdits() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        var expected = Catalog.large(count: 300)
        try state.root.set(expected)
        var random = SystemRandomNumberGenerator()
        for round in 0 ..< 30 {
            let index = Int.random(in: 0 ..< expected.items.count, using: &random)
            switch round % 3 {
            case 0: expected.items[index].notes += " edited \(round)"
            case 1: expected.items.insert(Item(id: -round, name: "new", notes: "n", flags: []), at: index)
            default: expected.items.remove(at: index)
            }
            try state.root.set(expected)
        }
        #expect(state.value == expected)
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: "catalog", default: Catalog()).value == expected)
        let report = try fixture.store.verify(VerificationOptions())
        #expect(report.isClean)
    }
}

extension LargeStateTests {
    /// A large array's chunks are kept between versions and only the ones around a change are cut
    /// again: after edits at the start, the middle and the end (changes, inserts, removals, in
    /// place and through `set`), the head record is byte for byte the one a fresh write of the
    /// final value makes (the same chunks, so the same parts), and reads back exactly. With
    /// `largeNote`, one item's notes are a part of their own inside a chunk (a chunk with parts
    /// of its own, whose container's parts are gathered and sorted again), until an edit
    /// shortens them and the parts are edited in place from then on.
    @Test(arguments: [0, 20_000])
    func chunksKeptBetweenVersionsAreTheChunksAFreshWriteMakes(largeNote: Int) throws {
        let fixture = try Fixture()
        let edited = try LensStore(store: fixture.store, name: "edited", default: Catalog())
        var expected = Catalog.large(count: 600)
        if largeNote > 0 { expected.items[200].notes = String(repeating: "n", count: largeNote) }
        try edited.root.set(expected)
        let edits: [(inout [Item]) -> Void] = [
            { $0[0].name = "first" },
            { $0[599].notes = "last" },
            { $0[300].flags.append(false) },
            { $0.insert(Item(id: -1, name: "inserted", notes: "", flags: []), at: 250) },
            { $0.remove(at: 10) },
            { $0.append(Item(id: -2, name: "appended", notes: String(repeating: "x", count: 3000), flags: [true])) },
            { $0.removeLast(3) },
            { $0.insert(Item(id: -3, name: "at the start", notes: "", flags: []), at: 0) },
            { $0.swapAt(100, 400) },
            { items in for index in items.indices where items[index].notes.utf8.count > 16_384 { items[index].notes = "short" } },
            { $0[450].name = "after" },
        ]
        for (round, edit) in edits.enumerated() {
            edit(&expected.items)
            if round % 2 == 0 {
                try edited.root.items.update(edit)
            } else {
                try edited.root.set(expected)
            }
            #expect(edited.value == expected)
        }
        let fresh = try LensStore(store: fixture.store, name: "fresh", default: Catalog())
        try fresh.root.set(expected)
        let editedHead = try #require(try fixture.store.record(forKey: "statelens/h/edited"))
        let freshHead = try #require(try fixture.store.record(forKey: "statelens/h/fresh"))
        #expect(editedHead.references.count > 16)
        #expect(editedHead.references == freshHead.references)
        // The 18-byte header holds the sequence and date; the template after it is the content.
        #expect(editedHead.value.dropFirst(18) == freshHead.value.dropFirst(18))
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: "edited", default: Catalog()).value == expected)
        #expect(try fixture.store.verify(VerificationOptions()).isClean)
    }
}

/// A large array edited at its start: the chunks after the edit are taken from the previous
/// version with their member counts moved, so a wrong count would read the wrong elements.
@Suite(.blocking) struct ChunkPlacementTests {
    @Test(arguments: [1, 50, 400])
    func editsAtTheStartOfALargeArrayStoreWhatAFreshWriteStores(count: Int) throws {
        let fixture = try Fixture()
        let edited = try LensStore(store: fixture.store, name: "edited", default: Catalog())
        var expected = Catalog.large(count: 600)
        try edited.root.set(expected)
        let front = (0 ..< count).map { Item(id: -$0, name: "front \($0)", notes: String(repeating: "f", count: 700), flags: []) }
        let edits: [(inout [Item]) -> Void] = [
            { $0.insert(contentsOf: front, at: 0) },
            { $0[$0.count - 1].name = "last" },
            { $0.removeFirst(count) },
            { $0[300].name = "middle" },
        ]
        for edit in edits {
            edit(&expected.items)
            try edited.root.items.update(edit)
            #expect(edited.value == expected)
        }
        let fresh = try LensStore(store: fixture.store, name: "fresh", default: Catalog())
        try fresh.root.set(expected)
        let editedHead = try #require(try fixture.store.record(forKey: "statelens/h/edited"))
        let freshHead = try #require(try fixture.store.record(forKey: "statelens/h/fresh"))
        #expect(editedHead.references == freshHead.references)
        #expect(editedHead.value.dropFirst(18) == freshHead.value.dropFirst(18))
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: "edited", default: Catalog()).value == expected)
    }
}

/// Values of every kind JSON has, through the canonical encoder and back through `JSONDecoder`.
@Suite(.blocking) struct CanonicalFormTests {
    enum Kind: Codable, Sendable, Equatable { case plain, tagged(String, count: Int) }

    struct Everything: Codable, Sendable, Equatable {
        var text = "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} é 名"
        var integers: [Int64] = [.min, -1, 0, .max]
        var unsigned: UInt64 = .max
        var doubles: [Double] = [0, 1, -1.5, 1e-300, 3.141592653589793, 1e300]
        var float: Float = 0.1
        var flag = true
        var missing: String? = nil
        var present: String? = "here"
        var data = Data([0, 1, 2, 255])
        var date = Date(timeIntervalSinceReferenceDate: 123_456.789)
        var url = URL(string: "https://example.com/a?b=c")!
        var decimal = Decimal(string: "12345.6789")!
        var map: [String: [Int]] = ["b": [2], "a": [1], "": []]
        var intKeys: [Int: String] = [3: "three", 1: "one"]
        var kinds: [Kind] = [.plain, .tagged("x", count: 2)]
        var nested: [[String: Kind?]] = [["k": nil, "j": .plain]]
        var large = String(repeating: "0123456789", count: 5000)
    }

    @Test func everyKindOfValueRoundTrips() throws {
        let fixture = try Fixture()
        do {
            let state = try LensStore(store: fixture.store, name: "everything", default: Everything())
            var value = Everything()
            value.flag = false
            try state.root.set(value)
        }
        try fixture.reopen()
        var expected = Everything()
        expected.flag = false
        let state = try LensStore(store: fixture.store, name: "everything", default: Everything())
        #expect(state.value == expected)
    }

    /// A key encoded twice in one container: the last value is stored, as `JSONEncoder` does.
    struct Twice: Codable, Sendable, Equatable {
        var value: Int
        var note = "n"

        enum CodingKeys: String, CodingKey { case value, note }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(-1, forKey: .value)
            try container.encode(note, forKey: .note)
            try container.encode(value, forKey: .value)
        }
    }

    @Test func aKeyEncodedTwiceStoresTheLastValueAsJSONEncoderDoes() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "twice", default: Twice(value: 0))
        try state.root.set(Twice(value: 7))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let head = try #require(try fixture.store.record(forKey: "statelens/h/twice"))
        #expect(head.value.dropFirst(18) == (try encoder.encode(Twice(value: 7))))
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: "twice", default: Twice(value: 0)).value == Twice(value: 7))
    }

    @Test func nonFiniteNumbersAreRefusedAndNothingIsCommitted() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "everything", default: Everything())
        #expect(throws: EncodingError.self) { try state.root.doubles.set([.nan]) }
        #expect(try state.versions().isEmpty)
    }
}
