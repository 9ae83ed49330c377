extension SortedMap {
    /// A B-tree node. Entries live in every node (not only in leaves), so each key is stored once.
    ///
    /// `@unchecked Sendable` is sound because nodes follow a strict copy-on-write discipline: a node
    /// is mutated only after `isKnownUniquelyReferenced` proved that exactly one map (or one parent
    /// node owned by that map) references it. A node reachable from more than one map, snapshot or
    /// iterator is never mutated, only copied, so any node another thread can see is immutable.
    final class Node: @unchecked Sendable {
        /// Leaves and the nodes above them have limits of their own. A commit copies the path to each
        /// key it changes while the published version still shares it: every node above the leaf
        /// gets a new child array (a retain of each child, cold in the cache, and a release when the
        /// old version goes) and the leaf a new value array (a copy of each record). Narrow nodes
        /// copy less per level; the lookups' string comparisons stay ~log₂ n whatever the fan-out.
        /// Measured on a record tree shaped like `facadespeed`'s 400,000-record Persist store, three
        /// changes per commit as a Persist write makes (release build, thread CPU, medians of three
        /// runs of 20,000 at load average ~10; Docs/benchmarks/analysis.md, session 14):
        ///
        ///     leaf  inner  3 lookups  apply 3 changes  release of the old version
        ///       63     63     8.3 µs          10.7 µs          4.7 µs
        ///       63     15     8.6 µs           9.8 µs          3.5 µs
        ///       31     31     8.2 µs           8.5 µs          3.2 µs
        ///       31     15     8.2 µs           8.2 µs          2.7 µs
        ///       15     15     8.9 µs           8.1 µs          2.4 µs
        ///       15      7     9.4 µs           8.4 µs          2.3 µs
        ///
        /// Earlier, with one limit for both (1M random 29-byte keys, Int values), inserts and
        /// lookups barely moved between 15 and 127 keys: they are bound by cache misses on the
        /// out-of-line String keys that binary search touches.
        static var maxLeafKeys: Int { 31 }
        /// See ``maxLeafKeys``.
        static var maxInnerKeys: Int { 15 }
        /// The most keys a leaf (`leaf`) or a node above the leaves holds.
        static func maxKeys(leaf: Bool) -> Int { leaf ? maxLeafKeys : maxInnerKeys }
        /// Nodes other than the root never hold fewer keys, which keeps the tree's height
        /// logarithmic however many entries are removed.
        static func minKeys(leaf: Bool) -> Int { maxKeys(leaf: leaf) / 2 }
        /// This node's limit: a leaf's or an inner node's (a node never changes between the two).
        var maxKeys: Int { Self.maxKeys(leaf: isLeaf) }
        var minKeys: Int { Self.minKeys(leaf: isLeaf) }

        var keys: ContiguousArray<Key>
        var values: ContiguousArray<Value>
        /// Empty in leaves; otherwise `keys.count + 1` subtrees, `children[i]` holding the keys
        /// between `keys[i - 1]` and `keys[i]`.
        var children: ContiguousArray<Node>

        var isLeaf: Bool { children.isEmpty }

        /// Reserves room for one key beyond `maxKeys`: inserting into a full node overflows it
        /// briefly before the parent splits it, and that must not reallocate the arrays.
        init<K: Collection<Key>, V: Collection<Value>, C: Collection<Node>>(
            keys: K, values: V, children: C
        ) {
            self.keys = []
            self.values = []
            self.children = []
            let limit = Self.maxKeys(leaf: children.isEmpty)
            self.keys.reserveCapacity(limit + 1)
            self.values.reserveCapacity(limit + 1)
            if !children.isEmpty { self.children.reserveCapacity(limit + 2) }
            self.keys.append(contentsOf: keys)
            self.values.append(contentsOf: values)
            self.children.append(contentsOf: children)
        }

        /// A leaf that takes `keys` and `values` as they are (their capacity already reserved).
        convenience init(keys: ContiguousArray<Key>, values: ContiguousArray<Value>) {
            self.init(sharing: keys, values, [])
        }

        /// A node that takes the three arrays as they are: sharing their buffers with another node
        /// until one of them changes them (the arrays' own copy on write).
        private init(sharing keys: ContiguousArray<Key>, _ values: ContiguousArray<Value>, _ children: ContiguousArray<Node>) {
            self.keys = keys
            self.values = values
            self.children = children
        }

        convenience init() {
            self.init(keys: [], values: [], children: [])
        }

        /// A node with this one's entries, for a tree that is about to change it while another still
        /// holds this one. The copy shares the three arrays, so only those the change then writes
        /// are copied: on a path to a changed entry, a node above the leaf rewrites one child
        /// reference (its child array is copied: pointers, retained) and keeps its keys and values,
        /// and the leaf replacing a value keeps its keys. Copying every array up front cost a
        /// 400,000-record store ~250 retains and generic element copies per node — 17% of a Persist
        /// write that changes three keys (Docs/benchmarks/analysis.md, session 12).
        func copy() -> Node {
            Node(sharing: keys, values, children)
        }

        /// The first index whose key is `>= key`, and whether that key equals `key`.
        func index(of key: Key) -> (index: Int, found: Bool) {
            // A local copy keeps the loop free of exclusivity checks on the class property.
            let keys = self.keys
            var low = 0
            var high = keys.count
            while low < high {
                let middle = (low + high) / 2
                if keys[middle] < key { low = middle + 1 } else { high = middle }
            }
            return (low, low < keys.count && keys[low] == key)
        }

        /// Makes `children[i]` safe to mutate: copies it when another tree still shares it.
        /// Callers must themselves be uniquely referenced.
        private func makeChildUnique(_ i: Int) {
            if !isKnownUniquelyReferenced(&children[i]) {
                children[i] = children[i].copy()
            }
        }

        // MARK: Insertion

        /// Inserts or replaces; may leave `self` holding `maxKeys + 1` keys, which the caller
        /// repairs with `split()` (the parent, or the map for the root).
        func updateValue(_ value: Value, forKey key: Key) -> Value? {
            let (i, found) = index(of: key)
            if found {
                let old = values[i]
                values[i] = value
                return old
            }
            if isLeaf {
                keys.insert(key, at: i)
                values.insert(value, at: i)
                return nil
            }
            makeChildUnique(i)
            let old = children[i].updateValue(value, forKey: key)
            if children[i].keys.count > children[i].maxKeys {
                let (middleKey, middleValue, right) = children[i].split()
                keys.insert(middleKey, at: i)
                values.insert(middleValue, at: i)
                children.insert(right, at: i + 1)
            }
            return old
        }

        /// Splits an overflowing node: `self` keeps the lower half, the returned node takes the
        /// upper half, and the middle entry moves up to the parent as their separator.
        func split() -> (key: Key, value: Value, right: Node) {
            let middle = keys.count / 2
            let right = Node(
                keys: keys[(middle + 1)...],
                values: values[(middle + 1)...],
                children: isLeaf ? [] : children[(middle + 1)...]
            )
            let separator = (keys[middle], values[middle], right)
            keys.removeSubrange(middle...)
            values.removeSubrange(middle...)
            if !isLeaf { children.removeSubrange((middle + 1)...) }
            return separator
        }

        // MARK: Removal

        /// Removes `key`, which the caller has checked is present (so a shared path is never
        /// copied for nothing). May leave `self` with fewer than `minKeys` keys, which the
        /// parent repairs.
        func removeValue(forKey key: Key) -> Value {
            let (i, found) = index(of: key)
            if isLeaf {
                precondition(found, "removeValue(forKey:) requires a present key")
                keys.remove(at: i)
                return values.remove(at: i)
            }
            makeChildUnique(i)
            let removed: Value
            if found {
                // An internal entry separates two subtrees, so replace it with its in-order
                // predecessor, which always sits in a leaf.
                let predecessor = children[i].removeLast()
                keys[i] = predecessor.key
                removed = values[i]
                values[i] = predecessor.value
            } else {
                removed = children[i].removeValue(forKey: key)
            }
            rebalanceChild(i)
            return removed
        }

        private func removeLast() -> (key: Key, value: Value) {
            if isLeaf { return (keys.removeLast(), values.removeLast()) }
            let last = children.count - 1
            makeChildUnique(last)
            let entry = children[last].removeLast()
            rebalanceChild(last)
            return entry
        }

        /// Restores `minKeys` in `children[i]` (already unique) by borrowing an entry through
        /// the separator from a sibling that can spare one, or else by merging with a sibling.
        private func rebalanceChild(_ i: Int) {
            let minKeys = children[i].minKeys
            guard children[i].keys.count < minKeys else { return }
            if i > 0, children[i - 1].keys.count > minKeys {
                makeChildUnique(i - 1)
                let left = children[i - 1]
                let child = children[i]
                child.keys.insert(keys[i - 1], at: 0)
                child.values.insert(values[i - 1], at: 0)
                keys[i - 1] = left.keys.removeLast()
                values[i - 1] = left.values.removeLast()
                if !left.isLeaf { child.children.insert(left.children.removeLast(), at: 0) }
            } else if i + 1 < children.count, children[i + 1].keys.count > minKeys {
                makeChildUnique(i + 1)
                let right = children[i + 1]
                let child = children[i]
                child.keys.append(keys[i])
                child.values.append(values[i])
                keys[i] = right.keys.removeFirst()
                values[i] = right.values.removeFirst()
                if !right.isLeaf { child.children.append(right.children.removeFirst()) }
            } else {
                mergeChildren(at: i > 0 ? i - 1 : i)
            }
        }

        /// Folds `children[i + 1]` and the separator between them into `children[i]`. One of them
        /// is a key short of `minKeys` and the other has exactly `minKeys`, so the result holds
        /// `2 * minKeys <= maxKeys` keys. Only the left node is written; the right one is merely
        /// read and dropped, so it need not be unique.
        private func mergeChildren(at i: Int) {
            makeChildUnique(i)
            let left = children[i]
            let right = children.remove(at: i + 1)
            left.keys.append(keys.remove(at: i))
            left.values.append(values.remove(at: i))
            left.keys.append(contentsOf: right.keys)
            left.values.append(contentsOf: right.values)
            left.children.append(contentsOf: right.children)
        }
    }
}
