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

        var keys: NodeKeys
        /// The entries' values, but for a leaf's ``patch``ed slot: read through ``value(_:)``.
        var storedValues: ContiguousArray<Value>
        /// Empty in leaves; otherwise `keys.count + 1` subtrees, the `i`th holding the keys between
        /// `keys[i - 1]` and `keys[i]`, but for an inner node's ``patch``ed slot: read through
        /// ``child(_:)``.
        var storedChildren: ContiguousArray<Node>
        /// One slot this node holds apart from the array it shares with the node it was copied from:
        /// in a leaf the slot's value (a ``ValueBox``), above the leaves its child (a `Node`).
        ///
        /// A commit copies the path to each key it changes while the published version still shares
        /// it. Writing the changed slot into the shared array would copy the array: above the leaves
        /// a retain of each of ~16 children, in a leaf of each of ~31 records' heap `Data`, each a
        /// cold cache and TLB miss (and a release again when the old version goes). The patch costs
        /// one. It is folded into the array (the array then copied once, as before) when the node
        /// next changes another slot or its shape, or when it has been handed on through
        /// ``maxPatchAge`` copies. Until then the shared array keeps the slot's old child or record
        /// alive: one per patched node, and below an old child what has changed under it since
        /// (Docs/architecture.md).
        private var patch: AnyObject?
        /// The ``patch``ed slot, or -1.
        private var patchSlot: Int32 = -1
        /// Whether the patchable array (a leaf's values, an inner node's children) came from
        /// ``copy()`` and has not been written since: then it is most likely shared, and changing one
        /// slot takes a patch rather than a copy. A hint only: the arrays' own copy on write keeps
        /// every write correct either way.
        private var sharesSlots = false
        /// How many copies the patch has been handed on through (see ``copy()``).
        private var patchAge: UInt8 = 0
        /// The most copies a patch is handed on through before a copy folds it. A node changed at
        /// one slot commit after commit (the path to `head`, to the newest key) then keeps patching
        /// over one array, but the array's stale slot holds the subtree as it was at the last fold,
        /// and every version since, ever older, stays alive below it: unbounded, in a 420,000-record
        /// tree an old copy of each leaf under the tree's busiest slot. Folding every fifth copy
        /// bounds what the slot keeps to the versions of the last few commits under it; 0 (fold at
        /// every copy) measured the hot paths ~10% slower than 4 or 16 (Docs/benchmarks/analysis.md,
        /// session 16).
        static var maxPatchAge: UInt8 { 4 }

        var isLeaf: Bool { storedChildren.isEmpty }

        /// The value of entry `i`.
        func value(_ i: Int) -> Value {
            if Int(patchSlot) == i, isLeaf, let patch {
                return unsafeDowncast(patch, to: ValueBox.self).value
            }
            return storedValues[i]
        }

        /// The `i`th subtree (inner nodes only).
        func child(_ i: Int) -> Node {
            if Int(patchSlot) == i, let patch { return unsafeDowncast(patch, to: Node.self) }
            return storedChildren[i]
        }

        /// The subtrees in order (inner nodes; empty for a leaf).
        var children: ContiguousArray<Node> {
            var children = storedChildren
            if patchSlot >= 0, !isLeaf { children[Int(patchSlot)] = child(Int(patchSlot)) }
            return children
        }

        /// The entries' values in order.
        var values: ContiguousArray<Value> {
            var values = storedValues
            if patchSlot >= 0, isLeaf { values[Int(patchSlot)] = value(Int(patchSlot)) }
            return values
        }

        /// A leaf's patched value: boxed, so the patch costs the node one reference rather than a
        /// `Value`'s width in every node.
        final class ValueBox: Sendable {
            let value: Value
            init(_ value: Value) { self.value = value }
        }

        /// Reserves room for one entry beyond `maxKeys` in the values and children: inserting into a
        /// full node overflows it briefly before the parent splits it, and that must not reallocate
        /// those arrays. The keys' buffer grows as their bytes come.
        init<V: Collection<Value>, C: Collection<Node>>(keys: NodeKeys, values: V, children: C) {
            self.keys = keys
            self.storedValues = []
            self.storedChildren = []
            let limit = Self.maxKeys(leaf: children.isEmpty)
            self.storedValues.reserveCapacity(limit + 1)
            if !children.isEmpty { self.storedChildren.reserveCapacity(limit + 2) }
            self.storedValues.append(contentsOf: values)
            self.storedChildren.append(contentsOf: children)
        }

        /// A leaf that takes `keys` and `values` as they are (their capacity already reserved).
        convenience init(keys: NodeKeys, values: ContiguousArray<Value>) {
            self.init(sharing: keys, values, [])
        }

        /// A node that takes the three arrays as they are: sharing their buffers with another node
        /// until one of them changes them (the arrays' own copy on write).
        private init(sharing keys: NodeKeys, _ values: ContiguousArray<Value>, _ children: ContiguousArray<Node>) {
            self.keys = keys
            self.storedValues = values
            self.storedChildren = children
        }

        convenience init() {
            self.init(keys: [], values: [], children: [])
        }

        /// A node with this one's entries, for a tree that is about to change it while another still
        /// holds this one. The copy shares the three arrays and the patch, so only what the change
        /// then writes is copied: on a path to a changed entry, a node above the leaf patches one
        /// child and a leaf one value (see ``patch``). Copying every array up front cost a
        /// 400,000-record store ~250 retains and generic element copies per node — 17% of a Persist
        /// write that changes three keys (Docs/benchmarks/analysis.md, session 12). A patch handed
        /// on ``maxPatchAge`` times is folded into the copy's own array instead.
        func copy() -> Node {
            let copy = Node(sharing: keys, storedValues, storedChildren)
            guard let patch, patchAge >= Self.maxPatchAge else {
                copy.patch = patch
                copy.patchSlot = patchSlot
                copy.patchAge = patch == nil ? 0 : patchAge + 1
                copy.sharesSlots = true
                return copy
            }
            if isLeaf {
                copy.storedValues[Int(patchSlot)] = unsafeDowncast(patch, to: ValueBox.self).value
            } else {
                copy.storedChildren[Int(patchSlot)] = unsafeDowncast(patch, to: Node.self)
            }
            return copy
        }

        /// Writes the patch into its array, before a change that needs the array itself (another
        /// slot, or the node's shape). The array is copied then if it is still shared, once.
        func fold() {
            sharesSlots = false
            guard let patch else { return }
            let slot = Int(patchSlot)
            self.patch = nil
            patchSlot = -1
            patchAge = 0
            if isLeaf {
                storedValues[slot] = unsafeDowncast(patch, to: ValueBox.self).value
            } else {
                storedChildren[slot] = unsafeDowncast(patch, to: Node.self)
            }
        }

        /// Validates the patch (for ``SortedMap/checkInvariants()``): a slot in range, holding what
        /// this kind of node's slots hold.
        func checkPatch() {
            guard let patch else {
                precondition(patchSlot == -1, "a patched slot without a patch")
                return
            }
            let slots = isLeaf ? storedValues.count : storedChildren.count
            precondition((0 ..< slots).contains(Int(patchSlot)), "patched slot out of range")
            precondition(isLeaf ? patch is ValueBox : patch is Node, "patch of the wrong kind")
            precondition(patchAge <= Self.maxPatchAge, "patch handed on too often")
        }

        /// Sets entry `i`'s value; returns the old one.
        private func setValue(_ value: Value, at i: Int) -> Value {
            let old = self.value(i)
            // An inner node's values are not patchable (a few percent of the entries): written
            // through.
            guard isLeaf else {
                storedValues[i] = value
                return old
            }
            if Int(patchSlot) == i || (sharesSlots && patch == nil) {
                if patch == nil { patchAge = 0 }
                patch = ValueBox(value)
                patchSlot = Int32(i)
            } else {
                fold()
                storedValues[i] = value
            }
            return old
        }

        /// The first index whose key is `>= key`, and whether that key equals `key`.
        func index(of key: Key) -> (index: Int, found: Bool) {
            keys.index(of: key)
        }

        /// Child `i`, made safe to mutate: copied when another tree still shares it. Callers must
        /// themselves be uniquely referenced.
        private func uniqueChild(_ i: Int) -> Node {
            if Int(patchSlot) == i, patch != nil {
                var child = unsafeDowncast(patch.unsafelyUnwrapped, to: Node.self)
                patch = nil  // so that `child` alone holds it if no other node does
                if !isKnownUniquelyReferenced(&child) { child = child.copy() }
                patch = child
                return child
            }
            if sharesSlots && patch == nil {
                // The array's child is shared through the array: a copy, patched in.
                let child = storedChildren[i].copy()
                patch = child
                patchSlot = Int32(i)
                patchAge = 0
                return child
            }
            fold()
            if !isKnownUniquelyReferenced(&storedChildren[i]) {
                storedChildren[i] = storedChildren[i].copy()
            }
            return storedChildren[i]
        }

        // MARK: Insertion

        /// Inserts or replaces; may leave `self` holding `maxKeys + 1` keys, which the caller
        /// repairs with `split()` (the parent, or the map for the root).
        func updateValue(_ value: Value, forKey key: Key) -> Value? {
            let (i, found) = index(of: key)
            if found { return setValue(value, at: i) }
            if isLeaf {
                fold()
                keys.insert(key, at: i)
                storedValues.insert(value, at: i)
                return nil
            }
            let child = uniqueChild(i)
            let old = child.updateValue(value, forKey: key)
            if child.keys.count > child.maxKeys {
                let (middleKey, middleValue, right) = child.split()
                fold()
                keys.insert(middleKey, at: i)
                storedValues.insert(middleValue, at: i)
                storedChildren.insert(right, at: i + 1)
            }
            return old
        }

        /// Splits an overflowing node: `self` keeps the lower half, the returned node takes the
        /// upper half, and the middle entry moves up to the parent as their separator.
        func split() -> (key: Key, value: Value, right: Node) {
            fold()
            let middle = keys.count / 2
            let right = Node(
                keys: keys.removeKeys(from: middle + 1),
                values: storedValues[(middle + 1)...],
                children: isLeaf ? [] : storedChildren[(middle + 1)...]
            )
            let separator = (keys.removeLast(), storedValues[middle], right)
            storedValues.removeSubrange(middle...)
            if !isLeaf { storedChildren.removeSubrange((middle + 1)...) }
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
                fold()
                keys.remove(at: i)
                return storedValues.remove(at: i)
            }
            let child = uniqueChild(i)
            let removed: Value
            if found {
                // An internal entry separates two subtrees, so replace it with its in-order
                // predecessor, which always sits in a leaf.
                let predecessor = child.removeLast()
                keys.replace(at: i, with: predecessor.key)
                removed = setValue(predecessor.value, at: i)
            } else {
                removed = child.removeValue(forKey: key)
            }
            rebalanceChild(i)
            return removed
        }

        private func removeLast() -> (key: Key, value: Value) {
            if isLeaf {
                fold()
                return (keys.removeLast(), storedValues.removeLast())
            }
            let last = storedChildren.count - 1
            let entry = uniqueChild(last).removeLast()
            rebalanceChild(last)
            return entry
        }

        /// Restores `minKeys` in `children[i]` (already unique) by borrowing an entry through
        /// the separator from a sibling that can spare one, or else by merging with a sibling.
        private func rebalanceChild(_ i: Int) {
            let child = self.child(i)
            let minKeys = child.minKeys
            guard child.keys.count < minKeys else { return }
            if i > 0, self.child(i - 1).keys.count > minKeys {
                let left = uniqueChild(i - 1)
                left.fold()
                child.fold()
                child.keys.insert(keys[i - 1], at: 0)
                child.storedValues.insert(storedValues[i - 1], at: 0)
                keys.replace(at: i - 1, with: left.keys.removeLast())
                storedValues[i - 1] = left.storedValues.removeLast()
                if !left.isLeaf { child.storedChildren.insert(left.storedChildren.removeLast(), at: 0) }
            } else if i + 1 < storedChildren.count, self.child(i + 1).keys.count > minKeys {
                let right = uniqueChild(i + 1)
                right.fold()
                child.fold()
                child.keys.append(keys[i])
                child.storedValues.append(storedValues[i])
                keys.replace(at: i, with: right.keys.removeFirst())
                storedValues[i] = right.storedValues.removeFirst()
                if !right.isLeaf { child.storedChildren.append(right.storedChildren.removeFirst()) }
            } else {
                mergeChildren(at: i > 0 ? i - 1 : i)
            }
        }

        /// Folds `children[i + 1]` and the separator between them into `children[i]`. One of them
        /// is a key short of `minKeys` and the other has exactly `minKeys`, so the result holds
        /// `2 * minKeys <= maxKeys` keys. Only the left node is written; the right one is merely
        /// read and dropped, so it need not be unique.
        private func mergeChildren(at i: Int) {
            fold()
            let left = uniqueChild(i)
            left.fold()
            let right = storedChildren.remove(at: i + 1)
            left.keys.append(keys.remove(at: i))
            left.storedValues.append(storedValues.remove(at: i))
            left.keys.append(contentsOf: right.keys)
            left.storedValues.append(contentsOf: right.values)
            left.storedChildren.append(contentsOf: right.children)
        }
    }
}
