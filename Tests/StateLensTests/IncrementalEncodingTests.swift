import Foundation
import MetricsTestKit
import Testing
@testable import StateLens
import TestThreads

/// An update stores only what it changed: the parts of the state it did not touch are neither
/// encoded, hashed nor put again.
@Suite(.blocking) struct IncrementalEncodingTests {
    /// A store whose puts are counted (every `put` call, a deduplicated one too).
    private func countingStore(_ directory: TemporaryDirectory, _ metrics: TestMetrics) throws -> Store {
        var configuration = Store.Configuration()
        configuration.metricsFactory = metrics
        return try Store(at: directory.store, configuration: configuration)
    }

    @Test func anUpdateOfOneElementPutsOnlyTheChunkHoldingIt() throws {
        let directory = TemporaryDirectory()
        let metrics = TestMetrics()
        let store = try countingStore(directory, metrics)
        defer { try? store.close() }
        let state = try LensStore(store: store, name: "catalog", default: Catalog())
        try state.root.set(Catalog.large())
        let puts = metrics.counterTotal(label: "contentstore_puts_total")
        let blobs = try store.statistics().blobCount
        // The same length as "item 500". A changed member can still move its chunk's end (the
        // boundary follows its hash), so one or two chunks after it may change too: a handful of
        // the state's ~110 parts, each of them new (nothing unchanged is put again).
        try state.root.items.update { $0[500].name = "item 5ZZ" }
        let put = metrics.counterTotal(label: "contentstore_puts_total") - puts
        #expect(put >= 1 && put <= 3, "\(put) puts")
        #expect(try store.statistics().blobCount - blobs == Int(put))
        // A change of a small member outside the array puts at most the one chunk of the root
        // holding it (this root is itself over 16 KiB, so it is cut into chunks too).
        try state.root.version.set(7)
        #expect(metrics.counterTotal(label: "contentstore_puts_total") - puts - put <= 1)
    }

    @Test func elementsAnUpdateOnlyCopiedKeepTheirNodes() throws {
        var catalog = Catalog.large(count: 200)
        let old = try TreeEncoder.encode(catalog, previous: nil)
        catalog.items[120].name = "item 1ZZ"
        let new = try TreeEncoder.encode(catalog, previous: old)
        let oldItems = try #require(old.child(forKey: "items")).elements
        let newItems = try #require(new.child(forKey: "items")).elements
        #expect(newItems.count == 200)
        for index in newItems.indices where index != 120 { #expect(newItems[index] === oldItems[index]) }
        #expect(newItems[120] !== oldItems[120])
        var fresh: [Digest: Part] = [:]
        new.newParts(excluding: old.parts.sorted(), into: &fresh)
        #expect(fresh.count >= 1 && fresh.count <= 3, "only the chunks around the changed item are new, of about 20")
    }

    enum Edit: String, CaseIterable, Sendable {
        case changeOne, changeFirst, changeLast, insert, remove, append, removeLast, grow, shrink, renameKey
    }

    /// Chunks reused from the last version (skipped over without reading their members) give
    /// exactly the tree a fresh encoding gives: the same template and the same parts.
    @Test(arguments: Edit.allCases)
    func reusedChunksGiveTheTreeOfAFreshEncoding(edit: Edit) throws {
        var catalog = Catalog.large(count: 300)
        let old = try TreeEncoder.encode(catalog, previous: nil)
        switch edit {
        case .changeOne: catalog.items[150].notes = "short"
        case .changeFirst: catalog.items[0].name = "first"
        case .changeLast: catalog.items[299].notes += "longer"
        case .insert: catalog.items.insert(Item(id: -1, name: "inserted", notes: "", flags: []), at: 120)
        case .remove: catalog.items.remove(at: 77)
        case .append: catalog.items.append(Item(id: 300, name: "appended", notes: "n", flags: [true]))
        case .removeLast: catalog.items.removeLast()
        case .grow: catalog.items += Catalog.large(count: 50).items
        case .shrink: catalog.items.removeLast(260)
        case .renameKey:
            catalog.index["renamed"] = catalog.index.removeValue(forKey: "item 5")
        }
        let incremental = try TreeEncoder.encode(catalog, previous: old)
        let fresh = try TreeEncoder.encode(catalog, previous: nil)
        #expect(incremental.fragment == fresh.fragment)
        #expect(incremental.parts.sorted() == fresh.parts.sorted())
    }

    @Test func anInsertionKeepsTheNodesOnBothSidesOfIt() throws {
        var catalog = Catalog.large(count: 200)
        let old = try TreeEncoder.encode(catalog, previous: nil)
        catalog.items.insert(Item(id: -1, name: "inserted", notes: "", flags: []), at: 50)
        let new = try TreeEncoder.encode(catalog, previous: old)
        let oldItems = try #require(old.child(forKey: "items")).elements
        let newItems = try #require(new.child(forKey: "items")).elements
        for index in 0 ..< 50 { #expect(newItems[index] === oldItems[index]) }
        for index in 51 ..< 201 { #expect(newItems[index] === oldItems[index - 1]) }
        var fresh: [Digest: Part] = [:]
        new.newParts(excluding: old.parts.sorted(), into: &fresh)
        #expect(fresh.count < 5, "only the chunks around the insertion are new, of about 20")
        let json = try PartFormat.expand(new.fragment) { digest in
            if let part = fresh[digest] { return part.bytes }
            var known: [Digest: Part] = [:]
            new.newParts(excluding: [], into: &known)
            return try #require(known[digest]).bytes
        }
        #expect(try JSONDecoder().decode(Catalog.self, from: Data(json)) == catalog)
    }

    @Test func equalElementsWithOtherBytesAreStillRecognizedByEquality() throws {
        var catalog = Catalog.large(count: 100)
        let old = try TreeEncoder.encode(catalog, previous: nil)
        // The same text in a new string buffer: other bytes, an equal value.
        catalog.items[10].notes = String(decoding: Array(catalog.items[10].notes.utf8), as: UTF8.self)
        catalog.items[90].name = "changed"
        let new = try TreeEncoder.encode(catalog, previous: old)
        let oldItems = try #require(old.child(forKey: "items")).elements
        let newItems = try #require(new.child(forKey: "items")).elements
        #expect(newItems[10] === oldItems[10])
        #expect(newItems[90] !== oldItems[90])
    }

    /// The ends found by comparing whole runs of elements first are the ones an element-by-element
    /// comparison finds, wherever the change is (inside a run, at its edges, at the array's ends).
    @Test(arguments: [0, 1, 31, 32, 33, 63, 64, 100, 198, 199])
    func unchangedEndsAreTheElementByElementOnes(changed: Int) {
        struct Element { var number: Int; var text: String; var flag: Bool }  // with tail padding
        let old = (0 ..< 200).map { Element(number: $0, text: "element \($0)", flag: false) }
        func reference(_ old: [Element], _ new: [Element]) -> (Int, Int) {
            let limit = min(old.count, new.count)
            func same(_ a: Element, _ b: Element) -> Bool { a.number == b.number && a.text == b.text && a.flag == b.flag }
            var prefix = 0
            while prefix < limit, same(old[prefix], new[prefix]) { prefix += 1 }
            var suffix = 0
            while prefix + suffix < limit, same(old[old.count - 1 - suffix], new[new.count - 1 - suffix]) { suffix += 1 }
            return (prefix, suffix)
        }
        var edited = old
        edited[changed].flag = true
        var inserted = old
        inserted.insert(Element(number: -1, text: "new", flag: true), at: changed)
        var removed = old
        removed.remove(at: changed)
        for new in [old, edited, inserted, removed] {
            let found = Bitwise.unchangedEnds(of: old, and: new)
            #expect(found.prefix == reference(old, new).0 && found.suffix == reference(old, new).1)
        }
    }

    /// Strings are JSON as `JSONDecoder` reads them back: escaped where they must be, copied
    /// whole where nothing needs an escape.
    @Test(arguments: ["", "plain text", "a \"quoted\" word", "back\\slash", "line\nbreak\ttab\r\u{8}\u{C}", "\u{1}\u{1F}", "slash / é 🎉"])
    func stringsAreJSON(text: String) throws {
        let json = JSONText.string(text)
        #expect(try JSONDecoder().decode(String.self, from: Data(json)) == text)
        let needsEscape = text.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        #expect(needsEscape == (json.count != text.utf8.count + 2))
    }
}
