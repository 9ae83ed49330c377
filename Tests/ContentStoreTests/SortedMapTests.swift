import Testing

@testable import ContentStore
import TestThreads

/// Deterministic, so a failing seed reproduces.
/// Mixes ASCII and non-ASCII keys so ordering is exercised beyond plain bytes.
private func key(_ n: Int) -> String {
    switch n % 3 {
    case 0: "key-\(n)"
    case 1: "ключ-\(n)"
    default: "🔑\(n)"
    }
}

private struct Entry: Equatable {
    var key: String
    var value: Int
}

/// Compares full ordered contents via `Array(map)`.
private func expectEqual(
    _ map: SortedMap<String, Int>, _ model: [String: Int],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(map.count == model.count, sourceLocation: sourceLocation)
    #expect(map.isEmpty == model.isEmpty, sourceLocation: sourceLocation)
    expectElementsEqual(
        Array(map).map { Entry(key: $0.key, value: $0.value) },
        model.sorted { $0.key < $1.key }.map { Entry(key: $0.key, value: $0.value) },
        sourceLocation: sourceLocation)
}

/// Reports only the first difference: a dump of thousands of elements would bury it.
private func expectElementsEqual<T: Equatable>(
    _ actual: [T], _ expected: [T], sourceLocation: SourceLocation = #_sourceLocation
) {
    guard actual != expected else { return }
    let i = zip(actual, expected).prefix { $0 == $1 }.count
    func describe(_ elements: [T]) -> String {
        elements.dropFirst(i).first.map { String(describing: $0) } ?? "the end"
    }
    Issue.record(
        """
        sequences differ at index \(i): \(describe(actual)) instead of \(describe(expected)) \
        (\(actual.count) elements, expected \(expected.count))
        """, sourceLocation: sourceLocation)
}

/// Every node of the tree by identity, to observe what a mutation copied.
private func nodeIdentities(_ map: SortedMap<String, Int>) -> Set<ObjectIdentifier> {
    var seen: Set<ObjectIdentifier> = []
    var pending = [map.root]
    while let node = pending.popLast() {
        seen.insert(ObjectIdentifier(node))
        pending.append(contentsOf: node.children)
    }
    return seen
}

private func height(_ map: SortedMap<String, Int>) -> Int {
    var node = map.root
    var levels = 1
    while !node.isLeaf {
        node = node.children[0]
        levels += 1
    }
    return levels
}

@Suite("SortedMap", .blocking)
struct SortedMapTests {
    /// Random inserts, updates and removals against a Dictionary, then removal of whatever is
    /// left. The insert share falls from 85% to 5% and most removals aim at keys inserted
    /// earlier, so even with the large key space removals mostly hit; the tree grows through
    /// several levels and the drain takes it back down through borrows and merges.
    @Test(arguments: zip([500, 1_000_000], [1, 2] as [UInt64]))
    func matchesDictionaryModel(keySpace: Int, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var map = SortedMap<String, Int>()
        var model: [String: Int] = [:]
        var inserted: [String] = []
        var tallest = 0
        let steps = 30_000
        for step in 0..<steps {
            let insertPercent = 85 - 80 * step / steps
            if Int.random(in: 0..<100, using: &rng) < insertPercent {
                let k = key(Int.random(in: 0..<keySpace, using: &rng))
                let value = Int.random(in: 0..<1_000_000, using: &rng)
                #expect(map.updateValue(value, forKey: k) == model.updateValue(value, forKey: k))
                inserted.append(k)
                #expect(map[k] == value)
            } else {
                let k =
                    Int.random(in: 0..<100, using: &rng) < 80 && !inserted.isEmpty
                    ? inserted[Int.random(in: 0..<inserted.count, using: &rng)]
                    : key(Int.random(in: 0..<keySpace, using: &rng))
                #expect(map.removeValue(forKey: k) == model.removeValue(forKey: k))
                #expect(map[k] == nil)
            }
            let probe = key(Int.random(in: 0..<keySpace, using: &rng))
            #expect(map[probe] == model[probe])
            #expect(map.count == model.count)
            if step % 1_000 == 0 {
                expectEqual(map, model)
                map.checkInvariants()
                tallest = max(tallest, height(map))
            }
        }
        expectEqual(map, model)
        map.checkInvariants()
        // 500 keys fit in two levels; the large key space must have reached a third.
        #expect(tallest >= (keySpace > 10_000 ? 3 : 2))

        for (i, k) in model.keys.shuffled(using: &rng).enumerated() {
            #expect(map.removeValue(forKey: k) == model.removeValue(forKey: k))
            #expect(map[k] == nil)
            #expect(map.count == model.count)
            if i % 500 == 0 {
                expectEqual(map, model)
                map.checkInvariants()
            }
        }
        expectEqual(map, model)
        map.checkInvariants()
        #expect(map.isEmpty)
    }

    /// A map built in one pass from ascending keys (a checkpoint load) has the shape the inserts
    /// keep: fill bounds, one leaf depth, order. It holds exactly the entries, with nearly full
    /// leaves (the memory a loaded store takes), and later inserts and removals keep it sound.
    /// The counts straddle where a leaf splits in two (31 keys), where the leaves' parent becomes
    /// two levels (16 leaves of 31 and their 15 separators: 511) and three (8,191).
    @Test(arguments: [0, 1, 30, 31, 32, 33, 62, 63, 64, 65, 511, 512, 513, 4_097, 8_191, 8_192, 8_193, 70_001])
    func buildFromAscendingKeys(count: Int) {
        let keys = ContiguousArray((0 ..< count).map(key).sorted())
        let values = ContiguousArray(keys.indices)
        var index = 0
        var map = SortedMap(count: count) {
            defer { index += 1 }
            return (keys[index], values[index])
        }
        #expect(index == count)
        map.checkInvariants()
        var model = Dictionary(uniqueKeysWithValues: zip(keys, values))
        expectEqual(map, model)
        for (i, k) in keys.enumerated() where i % 97 == 0 { #expect(map[k] == i) }
        // The fewest leaves the count allows, and at scale at least 90% full: inserting ascending
        // keys one by one leaves them half full.
        var leaves = 0
        func countLeaves(_ node: SortedMap<String, Int>.Node) {
            if node.isLeaf { leaves += 1 } else { node.children.forEach(countLeaves) }
        }
        countLeaves(map.root)
        let maxKeys = SortedMap<String, Int>.Node.maxLeafKeys
        #expect(leaves <= (count + maxKeys - 1) / maxKeys + 1)
        if count >= 4_000 { #expect(Double(count) / Double(leaves) >= 0.9 * Double(maxKeys)) }
        var rng = SplitMix64(seed: UInt64(count))
        for step in 0 ..< 3_000 {
            let k = key(Int.random(in: 0 ..< 2 * max(count, 1), using: &rng))
            if step % 3 == 0 {
                #expect(map.removeValue(forKey: k) == model.removeValue(forKey: k))
            } else {
                #expect(map.updateValue(step, forKey: k) == model.updateValue(step, forKey: k))
            }
        }
        map.checkInvariants()
        expectEqual(map, model)
    }

    /// Copies taken along the way must keep the contents they had, however the original and the
    /// other copies change afterwards.
    @Test(arguments: [3, 4] as [UInt64])
    func snapshotsAreIndependent(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var map = SortedMap<String, Int>()
        var model: [String: Int] = [:]
        var snapshots: [(map: SortedMap<String, Int>, model: [String: Int])] = []
        for step in 0..<20_000 {
            let k = key(Int.random(in: 0..<5_000, using: &rng))
            if Int.random(in: 0..<100, using: &rng) < 65 {
                map.updateValue(step, forKey: k)
                model[k] = step
            } else {
                map.removeValue(forKey: k)
                model[k] = nil
            }
            if Int.random(in: 0..<400, using: &rng) == 0 {
                snapshots.append((map, model))
            }
            // Mutating a snapshot must not leak into the map or the other snapshots either.
            if !snapshots.isEmpty, Int.random(in: 0..<2_000, using: &rng) == 0 {
                let i = Int.random(in: 0..<snapshots.count, using: &rng)
                let victim = snapshots[i].model.keys.first ?? "absent"
                snapshots[i].map.removeValue(forKey: victim)
                snapshots[i].model[victim] = nil
                snapshots[i].map.updateValue(-step, forKey: "snapshot-only")
                snapshots[i].model["snapshot-only"] = -step
            }
        }
        #expect(snapshots.count > 10)
        expectEqual(map, model)
        for snapshot in snapshots {
            expectEqual(snapshot.map, snapshot.model)
            snapshot.map.checkInvariants()
        }
    }

    @Test func mutatingACopyCopiesOnlyOnePath() {
        var map = SortedMap<String, Int>()
        for n in 0..<20_000 { map.updateValue(n, forKey: key(n)) }
        let snapshot = map
        let before = nodeIdentities(snapshot)
        map.updateValue(-1, forKey: key(12_345))
        let after = nodeIdentities(map)
        #expect(after.subtracting(before).count == height(map))
        #expect(before.subtracting(after).count == height(map))
        #expect(snapshot[key(12_345)] == 12_345)
        #expect(map[key(12_345)] == -1)
    }

    /// A path copied for a change shares, with the tree it was copied from, every array the change
    /// does not write: above the changed entry a node's keys and values, and the changed entry's
    /// own keys; only the child arrays on the path and the written value array are new.
    @Test(arguments: [0, 12_345, 19_999])
    func aCopiedPathSharesTheArraysTheChangeDoesNotWrite(changed: Int) {
        var map = SortedMap<String, Int>()
        for n in 0..<20_000 { map.updateValue(n, forKey: key(n)) }
        let snapshot = map
        map.updateValue(-1, forKey: key(changed))
        func same<T>(_ a: ContiguousArray<T>, _ b: ContiguousArray<T>) -> Bool {
            a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
        }
        var (old, new) = (snapshot.root, map.root)
        var depth = 0
        while true {
            #expect(old !== new, "depth \(depth): the node on the path was not copied")
            #expect(same(old.keys, new.keys), "depth \(depth): keys copied")
            let (index, found) = new.index(of: key(changed))
            if found {
                #expect(!same(old.values, new.values) && new.values[index] == -1 && old.values[index] == changed)
                #expect(same(old.children, new.children), "depth \(depth): children copied below the changed entry")
                break
            }
            #expect(same(old.values, new.values), "depth \(depth): values copied above the changed entry")
            #expect(!same(old.children, new.children))
            (old, new) = (old.children[index], new.children[index])
            depth += 1
        }
        #expect(snapshot[key(changed)] == changed)
        snapshot.checkInvariants()
        map.checkInvariants()
    }

    @Test func uniquelyOwnedMapMutatesInPlace() {
        var map = SortedMap<String, Int>()
        for n in 0..<20_000 { map.updateValue(n, forKey: key(n)) }
        let before = nodeIdentities(map)
        map.updateValue(-1, forKey: key(12_345))
        map.removeValue(forKey: "not present")
        #expect(nodeIdentities(map) == before)
    }

    @Test func removingAnAbsentKeyLeavesASharedTreeAlone() {
        var map = SortedMap<String, Int>()
        for n in 0..<5_000 { map.updateValue(n, forKey: key(n)) }
        let snapshot = map
        #expect(map.removeValue(forKey: "absent") == nil)
        #expect(map.root === snapshot.root)
        #expect(map.count == 5_000)
    }

    @Test func updateAndRemoveReturnPreviousValues() {
        var map = SortedMap<String, Int>()
        #expect(map.isEmpty)
        #expect(map["a"] == nil)
        #expect(map.updateValue(1, forKey: "a") == nil)
        #expect(map.updateValue(2, forKey: "a") == 1)
        #expect(map.count == 1)
        #expect(map.removeValue(forKey: "b") == nil)
        #expect(map.removeValue(forKey: "a") == 2)
        #expect(map.removeValue(forKey: "a") == nil)
        #expect(map.isEmpty)
    }

    @Test(arguments: [5, 6] as [UInt64])
    func removeEverythingThenRefill(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var map = SortedMap<String, Int>()
        let keys = (0..<20_000).map(key).shuffled(using: &rng)
        for round in 0..<2 {
            for (i, k) in keys.enumerated() { map.updateValue(i + round, forKey: k) }
            #expect(map.count == keys.count)
            map.checkInvariants()
            for (i, k) in keys.shuffled(using: &rng).enumerated() {
                #expect(map.removeValue(forKey: k) != nil)
                #expect(map.count == keys.count - i - 1)
                if i % 2_500 == 0 { map.checkInvariants() }
            }
            #expect(map.isEmpty)
            #expect(Array(map).isEmpty)
            #expect(map.root.isLeaf)
            map.checkInvariants()
        }
    }

    // MARK: forEach(from:)

    /// Even numbers only, so every odd number falls between two keys; 4,000 keys span levels.
    private static let evens: SortedMap<String, Int> = {
        var map = SortedMap<String, Int>()
        for n in stride(from: 0, to: 8_000, by: 2) { map.updateValue(n, forKey: padded(n)) }
        return map
    }()

    private static func padded(_ n: Int) -> String {
        let digits = String(n)
        return String(repeating: "0", count: 5 - digits.count) + digits
    }

    private func visit(_ map: SortedMap<String, Int>, from lowerBound: String?, limit: Int = .max) -> [Int] {
        var visited: [Int] = []
        map.forEach(from: lowerBound) { _, value in
            visited.append(value)
            return visited.count < limit
        }
        return visited
    }

    @Test func forEachFromNilVisitsEverything() {
        expectElementsEqual(visit(Self.evens, from: nil), Array(stride(from: 0, to: 8_000, by: 2)))
    }

    @Test(arguments: [
        ("", 0),  // before the first key
        ("00000", 0),  // exactly the first key
        ("00001", 2),  // between two keys
        ("03000", 3_000),  // exact match deep in the tree
        ("03001", 3_002),
        ("0300", 3_000),  // a prefix sorts before its extensions
        ("07998", 7_998),  // exactly the last key
        ("07999", nil),  // after the last key
        ("1", nil),
    ] as [(String, Int?)])
    func forEachFromStartsAtFirstKeyNotBelow(lowerBound: String, first: Int?) {
        let visited = visit(Self.evens, from: lowerBound)
        #expect(visited.first == first)
        if let first {
            expectElementsEqual(visited, Array(stride(from: first, to: 8_000, by: 2)))
        }
    }

    @Test func forEachFromEveryBoundary() {
        for n in 0..<8_002 {
            let expected = (n + 1) / 2 * 2
            #expect(visit(Self.evens, from: Self.padded(n), limit: 1).first == (expected < 8_000 ? expected : nil))
        }
    }

    @Test(arguments: [1, 2, 63, 64, 65, 1_000])
    func forEachStopsWhenBodyReturnsFalse(limit: Int) {
        expectElementsEqual(
            visit(Self.evens, from: "00101", limit: limit), Array(stride(from: 102, to: 8_000, by: 2).prefix(limit)))
    }

    @Test func forEachRethrows() {
        struct Stop: Error {}
        var visited = 0
        #expect(throws: Stop.self) {
            try Self.evens.forEach(from: nil) { _, _ in
                visited += 1
                if visited == 10 { throw Stop() }
                return true
            }
        }
        #expect(visited == 10)
    }

    @Test func emptyMapVisitsNothing() {
        let map = SortedMap<String, Int>()
        #expect(visit(map, from: nil).isEmpty)
        #expect(visit(map, from: "a").isEmpty)
        #expect(Array(map).isEmpty)
        #expect(map.keys(withPrefix: "").isEmpty)
    }

    // MARK: keys(withPrefix:)

    private static let words: [String] = [
        "app", "apple", "application", "apt", "b", "banana", "band", "bandana",
        "café", "cafeteria", "über", "ü", "uber", "日本", "日本語", "日本酒", "日", "🇯🇵", "🇯🇵🇫🇷",
    ]

    private static let wordMap: SortedMap<String, Int> = {
        var map = SortedMap<String, Int>()
        for (i, word) in words.enumerated() { map.updateValue(i, forKey: word) }
        return map
    }()

    @Test(arguments: [
        ("", SortedMapTests.words.sorted()),
        ("app", ["app", "apple", "application"]),  // the prefix is itself a key
        ("appl", ["apple", "application"]),
        ("ap", ["app", "apple", "application", "apt"]),
        ("band", ["band", "bandana"]),
        ("b", ["b", "banana", "band", "bandana"]),
        ("caf", ["cafeteria", "café"]),
        ("ü", ["ü", "über"]),
        ("u", ["uber"]),
        ("日本", ["日本", "日本語", "日本酒"]),
        ("🇯🇵", ["🇯🇵", "🇯🇵🇫🇷"]),
        ("applications", []),
        ("zebra", []),
        ("\u{10FFFF}", []),
    ])
    func keysWithPrefix(prefix: String, expected: [String]) {
        #expect(Self.wordMap.keys(withPrefix: prefix) == expected)
        #expect(expected == Self.words.filter { $0.hasPrefix(prefix) }.sorted())
    }

    @Test func keysWithPrefixMatchesFilterOnALargeMap() {
        var rng = SplitMix64(seed: 7)
        var map = SortedMap<String, Int>()
        var all: [String] = []
        for n in 0..<10_000 {
            let k = key(Int.random(in: 0..<100_000, using: &rng))
            if map.updateValue(n, forKey: k) == nil { all.append(k) }
        }
        all.sort()
        for prefix in ["", "key-", "key-1", "key-99", "ключ-2", "🔑", "🔑3", "🔑9999", "k", "nothing"] {
            expectElementsEqual(map.keys(withPrefix: prefix), all.filter { $0.hasPrefix(prefix) })
        }
    }
}

@Suite(.blocking) struct SortedMapPrefixEdgeTests {
    @Test func aCombiningMarkBetweenMatchesDoesNotHideLaterMatches() {
        var map = SortedMap<String, Int>()
        for (i, key) in ["e", "ez", "e\u{20DD}", "e一", "f"].enumerated() { map.updateValue(i, forKey: key) }
        #expect(map.keys(withPrefix: "e") == ["e", "ez", "e一"])
        #expect(map.keys(withPrefix: "").count == 5)
    }
}
