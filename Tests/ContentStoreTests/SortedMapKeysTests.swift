import Testing

@testable import ContentStore
import TestThreads

/// Keys where bytes and `String` disagree or strain the byte layout: canonically equivalent forms
/// ("\u{E9}" / "e\u{301}", the Kelvin sign / "K"), other non-ASCII, the empty key, 1 KiB keys, and
/// keys sharing long prefixes, mixed with plain ASCII ones.
///
/// The numbers after the equivalent forms have two digits: Swift 6.3's `String` comparison is not a
/// total order where a key not in NFC is a canonical prefix of a longer one ("cafe\u{301}-3" and
/// "caf\u{E9}-31" are neither `<`, `==` nor `>`), and no ordered structure can agree with a model
/// on such keys.
private func awkwardKey(_ n: Int) -> String {
    let long = String(repeating: "p", count: 1_024)
    let m = n / 9
    let twoDigits = (m % 40 < 10 ? "0" : "") + "\(m % 40)"
    switch n % 9 {
    case 0: return "caf\u{E9}-" + twoDigits
    case 1: return "cafe\u{301}-" + twoDigits
    case 2: return (m % 5 == 0 ? "\u{212A}" : "K") + twoDigits
    case 3: return m % 50 == 0 ? "" : "a-\(n)"
    case 4: return long + "\(n)"
    case 5: return "persist/default/e/\(n)"
    case 6: return "persist/default/\u{FC}\(n % 7)"
    case 7: return "e\u{20DD}\(n % 11)"
    default: return "\(n)"
    }
}

/// A sorted array holding the first-inserted form of each key, searched with `String`'s own
/// comparison: the record tree's behaviour before its keys became bytes.
private struct SortedModel {
    var entries: [(key: String, value: Int)] = []

    func index(of key: String) -> (index: Int, found: Bool) {
        let i = entries.partitioningIndex { $0.key >= key }
        return (i, i < entries.count && entries[i].key == key)
    }

    subscript(key: String) -> Int? {
        let (i, found) = index(of: key)
        return found ? entries[i].value : nil
    }

    mutating func updateValue(_ value: Int, forKey key: String) -> Int? {
        let (i, found) = index(of: key)
        guard found else {
            entries.insert((key, value), at: i)
            return nil
        }
        defer { entries[i].value = value }
        return entries[i].value
    }

    mutating func removeValue(forKey key: String) -> Int? {
        let (i, found) = index(of: key)
        return found ? entries.remove(at: i).value : nil
    }
}

extension Array {
    fileprivate func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

/// The map's entries as the model's, scalar for scalar: an equivalent but different form of a
/// key counts as a difference. Reports the first difference only (a 1 KiB key fills a screen).
private func expectSame(
    _ map: SortedMap<String, Int>, _ model: SortedModel, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(map.count == model.entries.count, sourceLocation: sourceLocation)
    // Scalars spelled out, so that equivalent forms differ.
    func describe(_ key: String, _ value: Int) -> String { "\(key.unicodeScalars.map(\.value)) = \(value)" }
    let actual = map.map(describe)
    let expected = model.entries.map(describe)
    guard let i = actual.indices.first(where: { $0 >= expected.count || actual[$0] != expected[$0] }) else {
        #expect(actual.count == expected.count, sourceLocation: sourceLocation)
        return
    }
    Issue.record("entry \(i): \(actual[i].prefix(200)) instead of \(expected[i].prefix(200))", sourceLocation: sourceLocation)
}

@Suite("SortedMap keys", .blocking)
struct SortedMapKeysTests {
    /// Random sets, removals and lookups of awkward keys against the `String`-keyed model, with
    /// snapshots taken and dropped at random and each re-read against its model when dropped.
    @Test(arguments: [5, 6] as [UInt64])
    func matchesStringKeyedModel(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var map = SortedMap<String, Int>()
        var model = SortedModel()
        var snapshots: [(map: SortedMap<String, Int>, model: SortedModel)] = []
        for step in 0..<12_000 {
            let key = awkwardKey(Int.random(in: 0..<3_000, using: &rng))
            switch Int.random(in: 0..<100, using: &rng) {
            case ..<60:
                #expect(map.updateValue(step, forKey: key) == model.updateValue(step, forKey: key))
            case ..<85:
                #expect(map.removeValue(forKey: key) == model.removeValue(forKey: key))
            default:
                #expect(map[key] == model[key])
            }
            if Int.random(in: 0..<300, using: &rng) == 0 { snapshots.append((map, model)) }
            if snapshots.count > 4 {
                let dropped = snapshots.remove(at: Int.random(in: 0..<snapshots.count, using: &rng))
                expectSame(dropped.map, dropped.model)
            }
        }
        map.checkInvariants()
        expectSame(map, model)
        for snapshot in snapshots { expectSame(snapshot.map, snapshot.model) }
    }

    /// A key's canonically equivalent form finds it, replaces its value, removes it, and leaves
    /// the form first stored in place, in nodes whose other keys are all ASCII and in mixed ones.
    @Test(arguments: [0, 5, 2_000])
    func equivalentFormsAreOneKey(asciiNeighbours: Int) {
        var map = SortedMap<String, Int>()
        for n in 0..<asciiNeighbours { map.updateValue(n, forKey: "k\(n)") }
        map.updateValue(-1, forKey: "caf\u{E9}")
        map.updateValue(-2, forKey: "K")
        #expect(map["cafe\u{301}"] == -1)
        #expect(map["\u{212A}"] == -2)  // KELVIN SIGN, canonically "K"
        #expect(map.updateValue(-3, forKey: "\u{212A}") == -2)
        #expect(map.count == asciiNeighbours + 2)
        #expect(map.contains { Array($0.key.unicodeScalars) == ["K"] && $0.value == -3 })
        #expect(map.removeValue(forKey: "cafe\u{301}") == -1)
        #expect(map["caf\u{E9}"] == nil)
        map.checkInvariants()
    }

    /// A map built in one pass from awkward keys (a checkpoint load) reads back as inserted, and
    /// looks each key up in both of its forms.
    @Test func bulkBuildOfAwkwardKeys() {
        var model = SortedModel()
        for n in 0..<4_000 { _ = model.updateValue(n, forKey: awkwardKey(n)) }
        var next = 0
        let map = SortedMap<String, Int>(count: model.entries.count) {
            defer { next += 1 }
            return model.entries[next]
        }
        map.checkInvariants()
        expectSame(map, model)
        for n in stride(from: 0, to: 4_000, by: 7) { #expect(map[awkwardKey(n)] == model[awkwardKey(n)]) }
        #expect(map["cafe\u{301}-3"] == map["caf\u{E9}-3"])
        #expect(map["\u{212A}1"] == map["K1"])
    }

    /// The empty key alone in a node has no bytes at all: built in one pass, inserted, removed and
    /// joined by other keys.
    @Test func theEmptyKeyAlone() {
        var loaded = [("", 1)].makeIterator()
        var map = SortedMap<String, Int>(count: 1) { loaded.next()! }
        #expect(map[""] == 1 && map.count == 1)
        #expect(map.removeValue(forKey: "") == 1)
        #expect(map.updateValue(2, forKey: "") == nil)
        map.updateValue(3, forKey: "a")
        #expect(map.map(\.key) == ["", "a"] && map[""] == 2)
        map.checkInvariants()
    }

    /// Prefix scans keep `String.hasPrefix` semantics over keys whose bytes would say otherwise.
    @Test(arguments: ["", "caf", "caf\u{E9}", "cafe", "cafe\u{301}", "K", "\u{212A}", "e", "persist/default/",
                      String(repeating: "p", count: 1_024), "a-1", "\u{10FFFF}"])
    func prefixScansMatchHasPrefix(prefix: String) {
        var map = SortedMap<String, Int>()
        var model = SortedModel()
        for n in 0..<3_000 {
            map.updateValue(n, forKey: awkwardKey(n))
            _ = model.updateValue(n, forKey: awkwardKey(n))
        }
        let expected = model.entries.map(\.key).filter { $0.hasPrefix(prefix) }
        #expect(map.keys(withPrefix: prefix).map { Array($0.unicodeScalars) } == expected.map { Array($0.unicodeScalars) })
    }
}
