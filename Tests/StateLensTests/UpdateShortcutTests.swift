import Foundation
import StateLens
import Testing
import TestThreads

/// The shortcuts an update takes from the version it builds on (Docs/statelens.md, "Speed"): new
/// parts are looked for only in the chunks its cut made, and the kept versions' keys come from
/// the version instead of a listing. Each must fall back when the version cannot vouch for them.
@Suite(.blocking) struct UpdateShortcutTests {
    /// A head record in format 1 written by hand: `json` inline as the template, no parts. A build
    /// that cut the state differently (here: not at all) stored the same JSON in other parts.
    static func writeInlineHead(_ json: Data, name: String, sequence: UInt64, on store: Store) throws {
        var value = Data([1, 1])
        withUnsafeBytes(of: sequence.littleEndian) { value.append(contentsOf: $0) }
        withUnsafeBytes(of: Date().timeIntervalSinceReferenceDate.bitPattern.littleEndian) { value.append(contentsOf: $0) }
        value.append(json)
        try store.write { try $0.setRecord(Record(value: value), forKey: "statelens/h/\(name)") }
    }

    static func canonical(_ catalog: Catalog) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(catalog)
    }

    @Test func aStateStoredInOtherPartsIsUpdatedWithEveryPartItsNewVersionNeeds() throws {
        let fixture = try Fixture()
        try Self.writeInlineHead(try Self.canonical(.large()), name: "catalog", sequence: 7, on: fixture.store)
        try fixture.reopen()
        let state = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        #expect(state.value == .large())
        // The loaded tree's chunks are not the stored record's parts: the update must put every
        // chunk it keeps, not only the one it re-cut.
        try state.root.items.update { $0[500].name = "renamed" }
        let head = try #require(try fixture.store.record(forKey: "statelens/h/catalog"))
        #expect(head.references.count > 16)
        #expect(head.references.allSatisfy { fixture.store.contains($0) })
        try state.root.items.update { $0[10].name = "renamed too" }

        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        _ = try fixture.store.collectGarbage(options)
        try fixture.reopen()
        var expected = Catalog.large()
        expected.items[500].name = "renamed"
        expected.items[10].name = "renamed too"
        let reopened = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        #expect(reopened.value == expected)
        #expect(try reopened.versions().map(\.sequence) == [9])
    }

    @Test func anUpdateAfterAReopenStoresOnlyTheChunksItChanged() throws {
        let fixture = try Fixture()
        let writer = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        try writer.root.set(.large())
        try fixture.reopen()
        let state = try LensStore(store: fixture.store, name: "catalog", default: Catalog())
        let before = try fixture.store.statistics()
        try state.root.items.update { $0[500].name = "renamed" }
        let after = try fixture.store.statistics()
        #expect(after.logicalBytes - before.logicalBytes < 64 * 1024, "the shortcut holds for a version read back, not only one written")
    }

    @Test(arguments: [0, 1, 3])
    func versionKeysFollowTheWriterThatKeepsFewestOrMost(fewer: Int) throws {
        let fixture = try Fixture()
        var keeping = LensStore<Document>.Configuration()
        keeping.keptVersions = 4
        var dropping = LensStore<Document>.Configuration()
        dropping.keptVersions = fewer
        let many = try LensStore(store: fixture.store, name: "doc", default: Document(), configuration: keeping)
        let few = try LensStore(store: fixture.store, name: "doc", default: Document(), configuration: dropping)
        func storedVersions() throws -> Int { try fixture.store.keys(withPrefix: "statelens/v/").count }

        for round in 1 ... 6 { try many.root.title.set("many \(round)") }
        #expect(try storedVersions() == 4)
        try few.root.title.set("few")
        #expect(try storedVersions() == fewer)
        try many.root.title.set("many again")
        #expect(try storedVersions() == min(4, fewer + 1))
        for round in 1 ... 3 { try few.root.title.set("few \(round)") }
        #expect(try storedVersions() == fewer)

        // Another process's view: the keys are listed from the store again after a reopen.
        try fixture.reopen()
        let reopened = try LensStore(store: fixture.store, name: "doc", default: Document(), configuration: keeping)
        try reopened.root.title.set("reopened")
        #expect(try storedVersions() == min(4, fewer + 1))
        #expect(try reopened.versions().map(\.sequence) == Array(UInt64(12 - min(4, fewer + 1)) ... 12).reversed())
    }
}
