/// An ordered map with O(1) snapshots: a persistent, copy-on-write B-tree.
///
/// Copying a map copies one reference. Mutating a map whose nodes are shared with a copy copies
/// only the nodes on the path from the root to the changed entry (plus the siblings a rebalance
/// touches); every other node stays shared. When the map is the nodes' only owner, mutation
/// happens in place.
struct SortedMap<Key: SortedMapKey, Value: Sendable>: Sendable {
    private(set) var root: Node
    private(set) var count: Int

    init() {
        root = Node()
        count = 0
    }

    var isEmpty: Bool { count == 0 }

    subscript(key: Key) -> Value? {
        var node = root
        while true {
            let (i, found) = node.index(of: key)
            if found { return node.value(i) }
            if node.isLeaf { return nil }
            node = node.child(i)
        }
    }

    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        makeRootUnique()
        let old = root.updateValue(value, forKey: key)
        if old == nil { count += 1 }
        // Growing only at the root keeps every leaf at the same depth.
        if root.keys.count > root.maxKeys {
            let (middleKey, middleValue, right) = root.split()
            root = Node(keys: [middleKey], values: [middleValue], children: [root, right])
        }
        return old
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        // Looking first means removing an absent key never copies a shared path.
        guard self[key] != nil else { return nil }
        makeRootUnique()
        let removed = root.removeValue(forKey: key)
        count -= 1
        // A merge can drain the root's last separator; its only child then becomes the root,
        // which is how the tree loses height.
        if root.keys.isEmpty && !root.isLeaf {
            root = root.child(0)
        }
        return removed
    }

    private mutating func makeRootUnique() {
        if !isKnownUniquelyReferenced(&root) {
            root = root.copy()
        }
    }

    /// Visits entries in ascending key order starting at the first key >= `lowerBound` (all when nil);
    /// stops when `body` returns false.
    func forEach(from lowerBound: Key?, _ body: (Key, Value) throws -> Bool) rethrows {
        var iterator = Iterator(root: root, from: lowerBound)
        while let (key, value) = iterator.next(), try body(key, value) {}
    }
}

extension SortedMap: Sequence {
    /// An in-order walk over a fixed version of the tree. It holds its own references to the
    /// nodes, so mutating the map during iteration copies them instead of disturbing the walk.
    struct Iterator: IteratorProtocol {
        /// The path from the root to the current node. `index` is the next key to yield from
        /// that node; everything before it, including `children[index]`, has been visited.
        private var path: ContiguousArray<(node: Node, index: Int)> = []

        init(root: Node, from lowerBound: Key?) {
            guard let lowerBound else {
                descendToFirst(root)
                return
            }
            var node = root
            while true {
                let (i, found) = node.index(of: lowerBound)
                path.append((node, i))
                // Everything in children[i] is below keys[i], which is already >= lowerBound.
                if found || node.isLeaf { return }
                node = node.child(i)
            }
        }

        private mutating func descendToFirst(_ subtree: Node) {
            var node = subtree
            while true {
                path.append((node, 0))
                if node.isLeaf { return }
                node = node.child(0)
            }
        }

        mutating func next() -> (key: Key, value: Value)? {
            while let (node, i) = path.last {
                guard i < node.keys.count else {
                    path.removeLast()
                    continue
                }
                path[path.count - 1].index = i + 1
                if !node.isLeaf { descendToFirst(node.child(i + 1)) }
                return (node.keys[i], node.value(i))
            }
            return nil
        }
    }

    func makeIterator() -> Iterator {
        Iterator(root: root, from: nil)
    }

    var underestimatedCount: Int { count }
}

extension SortedMap where Key == String {
    /// Keys that start with `prefix` (`String.hasPrefix` semantics), ascending.
    func keys(withPrefix prefix: String) -> [String] {
        guard !prefix.isEmpty else { return map(\.key) }
        var keys: [String] = []
        forEach(withPrefix: prefix) { key, _ in keys.append(key) }
        return keys
    }

    /// Calls `body` with each entry whose key starts with `prefix`, ascending by key.
    func forEach(withPrefix prefix: String, _ body: (String, Value) throws -> Void) rethrows {
        // Keys whose normalized scalars start with the prefix's lie in [prefix, prefix + U+10FFFF).
        // Not every key there has the prefix character by character ("e\u{20DD}" does not start with
        // "e"), and such a key can sit between two that do, so filter inside the range rather than
        // stopping at the first key that fails.
        let end = prefix + "\u{10FFFF}"
        try forEach(from: prefix) { key, value in
            guard prefix.isEmpty || key < end else { return false }
            if key.hasPrefix(prefix) { try body(key, value) }
            return true
        }
    }
}

extension SortedMap {
    /// Validates the B-tree's shape (for tests): fill bounds, uniform leaf depth, child counts,
    /// strict key order across the whole tree, `count`, and each node's patch.
    func checkInvariants() {
        var entries = 0
        var leafDepth: Int?
        func check(_ node: Node, depth: Int, above lower: Key?, below upper: Key?) {
            node.checkPatch()
            precondition(node.keys.count == node.values.count, "keys and values differ in length")
            precondition(node.keys.count <= node.maxKeys, "node overfull")
            if node !== root {
                precondition(node.keys.count >= node.minKeys, "node underfull")
            }
            for (a, b) in zip(node.keys, node.keys.dropFirst()) {
                precondition(a < b, "keys out of order within a node")
            }
            if let lower, let first = node.keys.first {
                precondition(lower < first, "key not above its left separator")
            }
            if let upper, let last = node.keys.last {
                precondition(last < upper, "key not below its right separator")
            }
            entries += node.keys.count
            if node.isLeaf {
                if let leafDepth {
                    precondition(depth == leafDepth, "leaves at different depths")
                } else {
                    leafDepth = depth
                }
                return
            }
            precondition(node.children.count == node.keys.count + 1, "wrong number of children")
            for (i, child) in node.children.enumerated() {
                check(
                    child, depth: depth + 1,
                    above: i == 0 ? lower : node.keys[i - 1],
                    below: i == node.keys.count ? upper : node.keys[i])
            }
        }
        check(root, depth: 0, above: nil, below: nil)
        precondition(root.isLeaf || !root.keys.isEmpty, "internal root without keys")
        precondition(entries == count, "count is \(count) but the tree holds \(entries) entries")
    }
}

extension SortedMap {
    /// A map of the `count` entries `next` yields, keys strictly ascending (the caller checks),
    /// built in one pass straight into its nodes: what a checkpoint load needs, where inserting a
    /// million keys one by one costs a descent and a binary search each and leaves the leaves half
    /// full (every split of ascending inserts leaves its left half behind for good), and where
    /// gathering the entries in arrays first touches as much memory again (at a million records,
    /// tens of megabytes of first-touch page faults in the open).
    ///
    /// The shape is fixed from the count alone: each level filled nearly to its limit
    /// (``Node/maxKeys(leaf:)``) and split as evenly as the counts allow, so every node but the
    /// root holds at least ``Node/minKeys(leaf:)`` and every leaf is at one depth. The entries then
    /// arrive in the tree's in-order walk (each node's keys between its children), so one node per
    /// level is open.
    init(count: Int, ascending next: () throws -> (Key, Value)) rethrows {
        // The key counts of each level's nodes, left to right: the leaves first, the root last.
        var sizes: [[Int]] = []
        var levelCount = count
        while levelCount > Node.maxKeys(leaf: sizes.isEmpty) {
            let nodes = Self.evenNodes(holding: levelCount, maxKeys: Node.maxKeys(leaf: sizes.isEmpty))
            sizes.append(nodes)
            levelCount = nodes.count - 1
        }
        sizes.append([levelCount])
        let top = sizes.count - 1
        // The open leaf's entries, kept in locals (31 of 32 entries land here), and one open node
        // per level above it.
        var leafKeys = NodeKeys.Builder(), leafValues = Self.nodeArray(Value.self)
        var leaves = 0
        var inner = (0 ..< top).map { _ in Self.innerNode() }
        var inners = [Int](repeating: 0, count: top)
        var completedRoot: Node?
        // Where the next entry goes: 0 for the open leaf; above, the open node at that level, whose
        // next key is the separator after the subtree just completed.
        var level = 0
        for _ in 0 ..< count {
            let (key, value) = try next()
            if level > 0 {
                inner[level - 1].keys.append(key)
                inner[level - 1].storedValues.append(value)
                level = 0  // the next child's subtree starts at its leftmost leaf
                continue
            }
            leafKeys.append(key)
            leafValues.append(value)
            guard leafKeys.count == sizes[0][leaves] else { continue }
            var completed = Node(keys: leafKeys.build(), values: leafValues)
            leafValues = Self.nodeArray(Value.self)
            leaves += 1
            // The leaf joins its parent; each ancestor that now has all its children joins its own.
            level = 1
            while level <= top {
                let parent = inner[level - 1]
                parent.storedChildren.append(completed)
                guard parent.storedChildren.count == sizes[level][inners[level - 1]] + 1 else { break }
                parent.keys.releaseUnusedCapacity()
                completed = parent
                inner[level - 1] = Self.innerNode()
                inners[level - 1] += 1
                level += 1
            }
            if level > top { completedRoot = completed }
        }
        self.count = count
        root = completedRoot ?? Node()
    }

    /// Room for a leaf's values, one beyond its limit (see ``Node/init(keys:values:children:)``).
    private static func nodeArray<Element>(_: Element.Type) -> ContiguousArray<Element> {
        var array = ContiguousArray<Element>()
        array.reserveCapacity(Node.maxKeys(leaf: true) + 1)
        return array
    }

    /// An empty node above the leaves, with room for the entries and children it will take.
    private static func innerNode() -> Node {
        let node = Node()
        node.storedChildren.reserveCapacity(Node.maxInnerKeys + 2)
        return node
    }

    /// Splits `count` entries into the fewest nodes of at most `maxKeys` keys with one entry
    /// between neighbours (their separator in the parent), sizes differing by at most one; returns
    /// the nodes' key counts. With k = ⌈(count + 1) / (maxKeys + 1)⌉ nodes each holds more than
    /// (maxKeys + 1) / 2 − 1 keys, so at least `maxKeys / 2` (``Node/minKeys(leaf:)``).
    private static func evenNodes(holding count: Int, maxKeys: Int) -> [Int] {
        let nodes = (count + 1 + maxKeys) / (maxKeys + 1)
        let keys = count - (nodes - 1)
        return (0 ..< nodes).map { node in keys / nodes + (node < keys % nodes ? 1 : 0) }
    }
}
