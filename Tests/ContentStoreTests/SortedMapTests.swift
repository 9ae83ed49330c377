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

/// Whether two arrays share one buffer (neither was copied from the other since).
private func same<T>(_ a: ContiguousArray<T>, _ b: ContiguousArray<T>) -> Bool {
    a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
}

/// The leaf holding `key` and the key's index in it; nil when the key is absent or sits above the
/// leaves.
private func leaf(of key: String, in map: SortedMap<String, Int>) -> (node: SortedMap<String, Int>.Node, index: Int)? {
    var node = map.root
    while true {
        let (i, found) = node.index(of: key)
        if node.isLeaf { return found ? (node, i) : nil }
        if found { return nil }
        node = node.child(i)
    }
}

/// How many nodes hold a patch: a slot whose value or child differs from its stored array's.
private func patchedNodes(_ map: SortedMap<String, Int>) -> Int {
    var patched = 0
    var pending = [map.root]
    while let node = pending.popLast() {
        if node.values != node.storedValues || zip(node.children, node.storedChildren).contains(where: { $0 !== $1 }) {
            patched += 1
        }
        pending.append(contentsOf: node.children)
    }
    return patched
}

/// `n` in five digits, so that the keys sort as the numbers do.
private func padded(_ n: Int) -> String {
    let digits = String(n)
    return String(repeating: "0", count: 5 - digits.count) + digits
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

    /// A path copied for a change shares every array with the tree it was copied from: each node
    /// above the changed entry holds its new child as a patch over the shared child array, and a
    /// changed leaf its new value over the shared value array, so nothing is copied element by
    /// element. Only an entry in a node above the leaves writes its value array through.
    @Test(arguments: [0, 12_345, 19_999])
    func aCopiedPathSharesItsArrays(changed: Int) {
        var map = SortedMap<String, Int>()
        for n in 0..<20_000 { map.updateValue(n, forKey: key(n)) }
        let snapshot = map
        map.updateValue(-1, forKey: key(changed))
        var (old, new) = (snapshot.root, map.root)
        var depth = 0
        while true {
            #expect(old !== new, "depth \(depth): the node on the path was not copied")
            #expect(same(old.keys.storage, new.keys.storage), "depth \(depth): keys copied")
            #expect(same(old.storedChildren, new.storedChildren), "depth \(depth): child array copied")
            let (index, found) = new.index(of: key(changed))
            if found {
                #expect(new.value(index) == -1 && old.value(index) == changed)
                #expect(same(old.storedValues, new.storedValues) == new.isLeaf)
                break
            }
            #expect(same(old.storedValues, new.storedValues), "depth \(depth): values copied above the changed entry")
            #expect(old.child(index) !== new.child(index))
            (old, new) = (old.child(index), new.child(index))
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
            #expect(visit(Self.evens, from: padded(n), limit: 1).first == (expected < 8_000 ? expected : nil))
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

/// The patches a copied node holds over the arrays it shares (`SortedMap.Node.patch`).
@Suite("SortedMap patches", .blocking)
struct SortedMapPatchTests {
    /// Keys "00000", "00002", … "07998" built in one pass, so leaves are full and odd keys fall
    /// between them.
    private static func evens() -> (SortedMap<String, Int>, [String: Int]) {
        let keys = stride(from: 0, to: 8_000, by: 2).map(padded)
        var next = 0
        let map = SortedMap<String, Int>(count: keys.count) {
            defer { next += 1 }
            return (keys[next], next * 2)
        }
        return (map, Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0 * 2) }))
    }

    /// The first even key from `n` on that sits in a leaf of `map`.
    private static func leafKey(from n: Int, in map: SortedMap<String, Int>) throws -> String {
        try #require(stride(from: n, to: 8_000, by: 2).map(padded).first { leaf(of: $0, in: map) != nil })
    }

    /// Random changes with snapshots taken and dropped at random, over a key space that keeps
    /// three levels: every snapshot must keep reading its own version while the map's patched
    /// nodes take further changes, fold, split, borrow and merge.
    @Test(arguments: [11, 12] as [UInt64])
    func snapshotsTakenAndDroppedAtRandomKeepTheirVersions(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var map = SortedMap<String, Int>()
        var model: [String: Int] = [:]
        var snapshots: [(map: SortedMap<String, Int>, model: [String: Int])] = []
        var dropped = 0
        for step in 0..<30_000 {
            let k = key(Int.random(in: 0..<3_000, using: &rng))
            if Int.random(in: 0..<100, using: &rng) < 60 {
                #expect(map.updateValue(step, forKey: k) == model.updateValue(step, forKey: k))
            } else {
                #expect(map.removeValue(forKey: k) == model.removeValue(forKey: k))
            }
            #expect(map[k] == model[k])
            if Int.random(in: 0..<6, using: &rng) == 0 { snapshots.append((map, model)) }
            if snapshots.count > 5 || (!snapshots.isEmpty && Int.random(in: 0..<8, using: &rng) == 0) {
                let snapshot = snapshots.remove(at: Int.random(in: 0..<snapshots.count, using: &rng))
                dropped += 1
                if dropped % 50 == 0 {
                    expectEqual(snapshot.map, snapshot.model)
                    snapshot.map.checkInvariants()
                } else {
                    let probe = key(Int.random(in: 0..<3_000, using: &rng))
                    #expect(snapshot.map[probe] == snapshot.model[probe])
                }
            }
            if step % 3_000 == 0 {
                expectEqual(map, model)
                map.checkInvariants()
            }
        }
        #expect(dropped > 1_000)
        #expect(height(map) == 3)
        expectEqual(map, model)
        map.checkInvariants()
        for snapshot in snapshots { expectEqual(snapshot.map, snapshot.model) }
    }

    /// What a test may keep of the leaf holding `key` without holding the leaf (a reference would
    /// make it shared, and the next change copy it): its identity, where its value array lives,
    /// the key's index and whether the leaf holds a patch.
    private static func leafState(of key: String, in map: SortedMap<String, Int>) throws
        -> (id: ObjectIdentifier, values: UnsafePointer<Int>?, index: Int, patched: Bool)
    {
        let (node, index) = try #require(leaf(of: key, in: map))
        return (
            ObjectIdentifier(node), node.storedValues.withUnsafeBufferPointer { $0.baseAddress }, index,
            node.values != node.storedValues)
    }

    /// A leaf changed while a snapshot shares it holds the value as a patch over the snapshot's
    /// value array; a change to another of its entries folds the patch into a value array of its
    /// own (the leaf is not copied again), and the snapshot keeps its values.
    @Test func aSecondChangeFoldsTheLeafsPatch() throws {
        var (map, _) = Self.evens()
        let snapshot = map
        let first = try Self.leafKey(from: 1_000, in: map)
        map.updateValue(-1, forKey: first)
        let old = try Self.leafState(of: first, in: snapshot)
        let patched = try Self.leafState(of: first, in: map)
        #expect(patched.id != old.id && patched.values == old.values && patched.patched)
        #expect(patchedNodes(map) == height(map))
        let second = try #require(leaf(of: first, in: map)).node.keys[patched.index == 0 ? 1 : 0]
        map.updateValue(-2, forKey: second)
        let folded = try Self.leafState(of: second, in: map)
        #expect(folded.id == patched.id, "the leaf was copied twice")
        #expect(folded.values != old.values && !folded.patched)
        #expect(map[first] == -1 && map[second] == -2)
        #expect(snapshot[first] == Int(first) && snapshot[second] == Int(second))
        map.checkInvariants()
        snapshot.checkInvariants()
    }

    /// Once the snapshot is gone and the parent has folded its patch (its shared child array held
    /// the leaf's original), the patched leaf owns the array it shared: a change to another of its
    /// slots folds the patch in place, and so did the parent's, without copying either array.
    @Test func aPatchFoldsInPlaceOnceTheArrayIsUnshared() throws {
        var map = SortedMap<String, Int>()
        var model: [String: Int] = [:]
        for n in stride(from: 0, to: 400, by: 2) {
            map.updateValue(n, forKey: padded(n))
            model[padded(n)] = n
        }
        #expect(height(map) == 2)
        var snapshot: SortedMap<String, Int>? = map
        let first = try Self.leafKey(from: 0, in: map)
        map.updateValue(-1, forKey: first)
        #expect(snapshot?[first] == Int(first))
        snapshot = nil
        let rootChildren = map.root.storedChildren.withUnsafeBufferPointer { $0.baseAddress }
        let patched = try Self.leafState(of: first, in: map)
        #expect(patched.patched)
        // A change under another child of the root folds the root's patch.
        let elsewhere = try Self.leafKey(from: 300, in: map)
        map.updateValue(-3, forKey: elsewhere)
        #expect(map.root.storedChildren.withUnsafeBufferPointer { $0.baseAddress } == rootChildren)
        let second = try #require(leaf(of: first, in: map)).node.keys[patched.index == 0 ? 1 : 0]
        map.updateValue(-2, forKey: second)
        let folded = try Self.leafState(of: second, in: map)
        #expect(folded.id == patched.id && folded.values == patched.values && !folded.patched)
        (model[first], model[elsewhere], model[second]) = (-1, -3, -2)
        expectEqual(map, model)
        map.checkInvariants()
    }

    /// A leaf changed at one slot commit after commit (a snapshot held over each change) hands its
    /// patch on through `maxPatchAge` copies, all sharing the first version's value array; the
    /// next copy folds it into an array of its own.
    @Test func aPatchIsHandedOnAFewCopiesThenFolded() throws {
        var (map, _) = Self.evens()
        let changed = try Self.leafKey(from: 2_000, in: map)
        let original = try Self.leafState(of: changed, in: map)
        var versions: [SortedMap<String, Int>] = []
        let handedOn = Int(SortedMap<String, Int>.Node.maxPatchAge)
        for commit in 1...handedOn + 2 {
            versions.append(map)
            map.updateValue(-commit, forKey: changed)
            let state = try Self.leafState(of: changed, in: map)
            #expect(state.patched == (commit <= handedOn + 1), "commit \(commit)")
            #expect((state.values == original.values) == (commit <= handedOn + 1), "commit \(commit)")
        }
        #expect(map[changed] == -(handedOn + 2))
        for (commit, version) in versions.enumerated() {
            #expect(version[changed] == (commit == 0 ? Int(changed) : -commit))
            version.checkInvariants()
        }
    }

    /// A node changed at one slot commit after commit, with the keys under that slot changing at
    /// random and each old version dropped once the next is published: what the patched nodes'
    /// shared arrays keep alive beyond the live tree stays within a few commits' paths, instead
    /// of an old version of every leaf under the slot.
    @Test func staleVersionsKeptByPatchesStayBounded() {
        var (map, model) = Self.evens()
        var published = map
        var rng = SplitMix64(seed: 13)
        // The keys under the root's first child.
        let range = 0 ..< map.root.child(0).keys.count * 2 * 31
        for commit in 0 ..< 300 {
            let n = Int.random(in: range, using: &rng) / 2 * 2
            map.updateValue(-commit, forKey: padded(n))
            model[padded(n)] = -commit
            published = map
        }
        #expect(published.count == map.count)
        var live = Set<ObjectIdentifier>()
        var pending = [map.root]
        while let node = pending.popLast() {
            live.insert(ObjectIdentifier(node))
            pending.append(contentsOf: node.children)
        }
        var kept = Set<ObjectIdentifier>()
        pending = [map.root]
        while let node = pending.popLast() {
            guard kept.insert(ObjectIdentifier(node)).inserted else { continue }
            pending.append(contentsOf: node.children)
            pending.append(contentsOf: node.storedChildren)
        }
        let stale = kept.subtracting(live).count
        #expect(stale <= 2 * (Int(SortedMap<String, Int>.Node.maxPatchAge) + 1), "\(stale) stale nodes")
        expectEqual(map, model)
        map.checkInvariants()
    }

    /// Iteration, `forEach(from:)` and `keys(withPrefix:)` read patched values and descend through
    /// patched children, in the map and (the stored arrays) in its snapshot.
    @Test func iterationReadsThroughPatches() {
        var (map, model) = Self.evens()
        let snapshot = map
        let original = model
        for n in stride(from: 0, to: 8_000, by: 2 * 37) {
            map.updateValue(-n, forKey: padded(n))
            model[padded(n)] = -n
        }
        #expect(patchedNodes(map) > 100)
        expectEqual(map, model)
        expectEqual(snapshot, original)
        var visited: [Int] = []
        map.forEach(from: padded(37 * 2 * 20 - 1)) { _, value in
            visited.append(value)
            return visited.count < 3
        }
        #expect(visited == [-(37 * 2 * 20), 37 * 2 * 20 + 2, 37 * 2 * 20 + 4])
        #expect(map.keys(withPrefix: "014") == (1_400..<1_500).filter { $0 % 2 == 0 }.map(padded))
        map.checkInvariants()
    }

    /// Inserts that split patched leaves and their parents, and removals that make patched nodes
    /// borrow and merge, with two snapshots held across them.
    @Test func splitsAndMergesOfPatchedNodes() {
        var (map, model) = Self.evens()
        let original = (map: map, model: model)
        var versions: [SortedMap<String, Int>] = []
        for n in stride(from: 0, to: 8_000, by: 2 * 7) {
            versions.append(map)  // as a commit finds its published version: each change copies
            map.updateValue(-n, forKey: padded(n))
            model[padded(n)] = -n
        }
        let patched = (map: map, model: model)
        #expect(patchedNodes(map) > 30)
        for n in stride(from: 1_001, to: 1_801, by: 2) {
            map.updateValue(n, forKey: padded(n))
            model[padded(n)] = n
        }
        map.checkInvariants()
        for n in 3_000..<5_000 {
            #expect(map.removeValue(forKey: padded(n)) == model.removeValue(forKey: padded(n)))
        }
        map.checkInvariants()
        expectEqual(map, model)
        expectEqual(original.map, original.model)
        expectEqual(patched.map, patched.model)
        original.map.checkInvariants()
        patched.map.checkInvariants()
        versions.forEach { $0.checkInvariants() }
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
