internal import CContentStoreSupport

/// A hash table keyed by ``Digest``, for the in-memory blob index: 60–64 bytes per entry with a
/// 24-byte value, where `Dictionary` costs 75–150 (it keeps a power-of-two bucket count at most
/// 75% full).
///
/// Open addressing with linear probing and Robin Hood ordering: every key sits at or after its
/// home slot, and the keys are kept sorted by hash, so a lookup stops at the first slot whose key
/// hashes higher than the one sought, and a removal shifts the rest of its run back (no
/// tombstones). The home slot is `hash × homeCount >> 64` ("fastrange"), which needs no
/// power-of-two size and preserves hash order at every size; so growing is one sequential sweep
/// (each key goes to `Swift.max(its home, the previous key's slot + 1)`), cheap enough to grow in small
/// steps. There is no wrap-around: a few tail slots past the home range take the runs that
/// spill off the end, and the tail lengthens when one does not fit.
///
/// Keys and values live in one allocation, keys first then values, so a probe scans 32-byte keys
/// only. A vacant slot holds the all-zero digest, so there is no per-slot metadata; the all-zero
/// digest itself, should anyone store it, is kept aside in ``zeroKeyValue``.
///
/// Value semantics by copy-on-write of the allocation.
struct DigestTable<Value: Sendable>: Sendable {
    private var storage: Storage?
    /// The value of the all-zero digest, which marks vacant slots and so cannot be stored in one.
    private var zeroKeyValue: Value?
    /// Mixed into every hash: the digests are content hashes, so whoever chooses the content can
    /// choose (by brute force) some bits of them; not knowing the seed, they cannot aim at slots.
    /// A checkpoint saves it (in the store's private files), so a load restores the slot order.
    let seed: UInt64
    private(set) var count = 0

    init() {
        self.init(seed: UInt64.random(in: .min ... .max))
    }

    init(minimumCapacity: Int) {
        self.init()
        reserveCapacity(minimumCapacity)
    }

    /// A given seed: a checkpoint's, or a fixed one for tests that need the same layout every run.
    /// Keys inserted in the order another table of the same seed iterates them each land at the end
    /// of their run: nothing shifts.
    init(seed: UInt64) {
        self.seed = seed
    }

    var isEmpty: Bool { count == 0 }

    /// Entries the slots hold before the table must grow.
    var capacity: Int { storage?.limit ?? 0 }

    /// Bytes allocated for the entries (keys, values and vacant slots), for statistics and tests.
    var memoryFootprint: Int { storage?.allocatedBytes ?? 0 }

    /// The longest distance of any key from its home slot (0 = at home): lookup cost, for tests.
    var maximumProbeDistance: Int {
        guard let storage else { return 0 }
        let slots = storage.slots
        var longest = 0
        for i in 0 ..< slots.count where !slots.keys[i].isVacantMarker {
            longest = Swift.max(longest, i - Self.home(hash(slots.keys[i]), slots.homeCount))
        }
        return longest
    }

    subscript(key: Digest) -> Value? {
        get {
            if key.isVacantMarker { return zeroKeyValue }
            guard let storage else { return nil }
            let slots = storage.slots
            let (index, found) = probe(key, hash(key), slots)
            return found ? slots.values[index] : nil
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Starts loading the memory a lookup, update or removal of `key` reads first (its home slot's
    /// key and value, and the next key line, where its run goes on), without waiting for it.
    ///
    /// In a large table each of those is a cache miss of its own; a loop over many keys that calls
    /// this a few keys ahead overlaps the misses, so its cost follows the keys it visits rather than
    /// the size of the table.
    @inline(__always)
    func prefetch(_ key: Digest) {
        guard let slots = storage?.slots else { return }
        let home = Self.home(hash(key), slots.homeCount)
        cs_prefetch_for_write(slots.keys + home)
        cs_prefetch_for_write(slots.keys + Swift.min(home + 2, slots.count - 1))
        cs_prefetch_for_write(slots.values + home)
    }

    /// Stores `value` for `key`; returns the value it replaced, nil if the key is new.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Digest) -> Value? {
        if key.isVacantMarker {
            let old = zeroKeyValue
            zeroKeyValue = value
            if old == nil { count += 1 }
            return old
        }
        let keyHash = hash(key)
        makeUnique()
        while true {
            // Only the pointers: a second reference to the storage would defeat the uniqueness
            // checks (rebuild would copy the values instead of moving them).
            if let slots = storage?.slots, let limit = storage?.limit {
                let (index, found) = probe(key, keyHash, slots)
                if found {
                    let old = (slots.values + index).move()
                    (slots.values + index).initialize(to: value)
                    return old
                }
                if storedCount < limit {
                    if insert(key, value, at: index, slots) {
                        count += 1
                        return nil
                    }
                    // The run reaches the last slot: lengthen the tail, keeping every position.
                    rebuild(homeCount: slots.homeCount)
                    continue
                }
            }
            rebuild(homeCount: grownHomeCount(toHold: storedCount + 1))
        }
    }

    /// Removes `key`; returns its value, nil if it was absent.
    @discardableResult
    mutating func removeValue(forKey key: Digest) -> Value? {
        if key.isVacantMarker {
            guard let old = zeroKeyValue else { return nil }
            zeroKeyValue = nil
            count -= 1
            return old
        }
        // Probe before copying, so removing an absent key from a shared table copies nothing; a
        // copy keeps every position, so `index` stays valid. (No local reference to the storage:
        // makeUnique would count it and always copy.)
        guard let shared = storage?.slots else { return nil }
        let (index, found) = probe(key, hash(key), shared)
        guard found else { return nil }
        makeUnique()
        let slots = storage!.slots
        let old = (slots.values + index).move()
        // Backward shift: pull each following displaced key one slot nearer its home, until a
        // vacant slot or a key already at home. The run stays sorted and gap-free.
        var end = index + 1
        while end < slots.count {
            let next = slots.keys[end]
            if next.isVacantMarker || Self.home(hash(next), slots.homeCount) == end { break }
            end += 1
        }
        let shifted = end - index - 1
        (slots.keys + index).update(from: slots.keys + index + 1, count: shifted)
        (slots.values + index).moveInitialize(from: slots.values + index + 1, count: shifted)
        slots.keys[end - 1] = .vacantMarker
        count -= 1
        return old
    }

    /// Makes room for `minimumCapacity` entries without further allocation.
    mutating func reserveCapacity(_ minimumCapacity: Int) {
        guard minimumCapacity > (storage?.limit ?? 0) else { return }
        rebuild(homeCount: Self.homeCount(toHold: minimumCapacity))
    }

    var keys: LazyMapSequence<DigestTable, Digest> { lazy.map(\.key) }
    var values: LazyMapSequence<DigestTable, Value> { lazy.map(\.value) }

    // MARK: Tuning

    /// Grow when the entries would pass this fraction of the home slots. Robin Hood keeps probes
    /// short up to here (random keys: longest distance from home ≈ 50–70 at 0.1–2M keys); past
    /// it, the shifting on insert, O(1/(1-load)²) slots, climbs steeply.
    static var maximumLoad: Double { 0.93 }
    /// Growth step. Memory per entry swings between `slot × growth / maximumLoad` (just after
    /// growing) and `slot / maximumLoad`: 56-byte slots stay ≤ 64 bytes only with growth ≤ ~1.06
    /// (measured over 1k…2M keys: worst 63.7, mean 61.7). Steps this small are affordable because
    /// growing is a sequential sweep, not a rehash by insertion (amortized: 1/(growth − 1) = 20
    /// slot copies per insert).
    static var growthFactor: Double { 1.05 }
    /// Tables from this size on (about 570,000 entries) get a mapping of their own, on huge pages
    /// where Linux gives them (``cs_large_allocate``): a probe of a large table then misses the
    /// cache but not also the TLB, and filling it faults 2 MiB at a time. The mapping is rounded up
    /// to 2 MiB, at most 6% here and 3% at a million entries; below this size the rounding would
    /// cost more than the pages save (and the TLB covers much of a smaller table anyway).
    static var largeAllocation: Int { 32 << 20 }
    /// Slots past the home range for runs spilling off the end: enough for typical runs.
    static func tailCount(homeCount: Int) -> Int { Swift.min(64, Swift.max(4, homeCount / 256)) }

    // MARK: Implementation

    /// Entries in slots (all but the all-zero digest's).
    private var storedCount: Int { zeroKeyValue == nil ? count : count - 1 }

    private static func homeCount(toHold entries: Int) -> Int {
        // +1 absorbs rounding, so `limit` is never below `entries`.
        Swift.max(8, Int((Double(entries) / maximumLoad).rounded(.up)) + 1)
    }

    private func grownHomeCount(toHold entries: Int) -> Int {
        let current = storage?.homeCount ?? 0
        return Swift.max(Int(Double(current) * Self.growthFactor) + 1, Self.homeCount(toHold: entries))
    }

    /// A keyed multiply–xorshift mix (two rounds; full avalanche) of one digest word: SHA-256
    /// output is already uniform, the mix is there for the seed.
    @inline(__always)
    private func hash(_ key: Digest) -> UInt64 {
        var x = key.hashSeedWord ^ seed
        x = (x ^ (x >> 32)) &* 0xD6E8_FEB8_6659_FD93
        x = (x ^ (x >> 32)) &* 0xD6E8_FEB8_6659_FD93
        return x ^ (x >> 32)
    }

    /// Maps a hash to `0 ..< homeCount` by its high bits, monotonically.
    @inline(__always)
    private static func home(_ hash: UInt64, _ homeCount: Int) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: homeCount)).high)
    }

    /// The slot holding `key` (found), or where it belongs (may be `slots.count`: off the end).
    @inline(__always)
    private func probe(_ key: Digest, _ hash: UInt64, _ slots: Slots) -> (index: Int, found: Bool) {
        var index = Self.home(hash, slots.homeCount)
        while index < slots.count {
            let candidate = slots.keys[index]
            if candidate.isVacantMarker { break }
            let candidateHash = self.hash(candidate)
            // Keys are sorted by hash: past the ones hashing equal, the key cannot be further on.
            if candidateHash > hash { break }
            if candidateHash == hash && candidate == key { return (index, true) }
            index += 1
        }
        return (index, false)
    }

    /// Puts a new key at `index` (from `probe`), shifting the run from there up by one slot.
    /// False, changing nothing, if the run reaches the last slot.
    private func insert(_ key: Digest, _ value: Value, at index: Int, _ slots: Slots) -> Bool {
        var vacant = index
        while vacant < slots.count && !slots.keys[vacant].isVacantMarker { vacant += 1 }
        guard vacant < slots.count else { return false }
        let shifted = vacant - index
        (slots.keys + index + 1).update(from: slots.keys + index, count: shifted)
        (slots.values + index + 1).moveInitialize(from: slots.values + index, count: shifted)
        slots.keys[index] = key
        (slots.values + index).initialize(to: value)
        return true
    }

    /// Moves the entries to a new allocation with `homeCount` home slots, in one sweep: they are
    /// already in hash order, which is home order at any size.
    private mutating func rebuild(homeCount: Int) {
        // Moving the values out is only allowed if no copy of the table shares them.
        let unique = storage != nil && isKnownUniquelyReferenced(&storage)
        var end = 0
        if let old = storage?.slots {
            for i in 0 ..< old.count where !old.keys[i].isVacantMarker {
                end = Swift.max(Self.home(hash(old.keys[i]), homeCount), end) + 1
            }
        }
        // A run that already spills past the home range keeps its length, plus the usual tail.
        let tail = Self.tailCount(homeCount: homeCount)
        let slotCount = Swift.max(homeCount, end) + tail
        let rebuilt = Storage(homeCount: homeCount, slotCount: slotCount, limit: Int(Double(homeCount) * Self.maximumLoad))
        if let oldStorage = storage {
            let old = oldStorage.slots, new = rebuilt.slots
            var next = 0
            for i in 0 ..< old.count where !old.keys[i].isVacantMarker {
                let key = old.keys[i]
                let index = Swift.max(Self.home(hash(key), homeCount), next)
                new.keys[index] = key
                if unique {
                    (new.values + index).moveInitialize(from: old.values + i, count: 1)
                } else {
                    (new.values + index).initialize(to: old.values[i])
                }
                next = index + 1
            }
            // Its values are moved out: nothing is left for its deinit to destroy.
            if unique { oldStorage.abandonValues() }
        }
        storage = rebuilt
    }

    private mutating func makeUnique() {
        guard storage != nil, !isKnownUniquelyReferenced(&storage) else { return }
        storage = storage!.copy()
    }
}

extension DigestTable: Sequence {
    struct Iterator: IteratorProtocol {
        // Holding the allocation keeps the pointers valid, and the table's later mutations copy it.
        private let storage: Storage?
        private let slots: Slots?
        private var index = 0
        private var zeroKeyValue: Value?

        fileprivate init(storage: Storage?, zeroKeyValue: Value?) {
            self.storage = storage
            slots = storage?.slots
            self.zeroKeyValue = zeroKeyValue
        }

        mutating func next() -> (key: Digest, value: Value)? {
            if let slots {
                while index < slots.count {
                    let i = index
                    index += 1
                    if !slots.keys[i].isVacantMarker { return (slots.keys[i], slots.values[i]) }
                }
            }
            guard let value = zeroKeyValue else { return nil }
            zeroKeyValue = nil
            return (Digest.vacantMarker, value)
        }
    }

    func makeIterator() -> Iterator { Iterator(storage: storage, zeroKeyValue: zeroKeyValue) }

    var underestimatedCount: Int { count }
}

// MARK: Storage

extension DigestTable {
    /// Where the entries are, for the length of one operation.
    fileprivate struct Slots {
        let keys: UnsafeMutablePointer<Digest>
        /// Initialized exactly where `keys` is not the vacant marker.
        let values: UnsafeMutablePointer<Value>
        let homeCount: Int
        /// Home slots plus tail slots.
        let count: Int
    }

    /// One allocation of `slotCount` keys, then `slotCount` values.
    fileprivate final class Storage: @unchecked Sendable {
        // @unchecked: the table writes to a Storage only while its sole owner (makeUnique).
        let homeCount: Int
        let slotCount: Int
        /// Entries the slots may hold before the table grows.
        let limit: Int
        let allocatedBytes: Int
        private let memory: UnsafeMutableRawPointer
        private let keys: UnsafeMutablePointer<Digest>
        private let values: UnsafeMutablePointer<Value>
        /// Set once the values were moved elsewhere, so deinit leaves them alone.
        private var valuesAbandoned = false

        init(homeCount: Int, slotCount: Int, limit: Int) {
            self.homeCount = homeCount
            self.slotCount = slotCount
            self.limit = limit
            let alignment = Swift.max(MemoryLayout<Digest>.alignment, MemoryLayout<Value>.alignment)
            let keyBytes = slotCount * MemoryLayout<Digest>.stride
            let valuesOffset = (keyBytes + alignment - 1) / alignment * alignment
            let bytes = valuesOffset + slotCount * MemoryLayout<Value>.stride
            let large = bytes >= DigestTable.largeAllocation ? cs_large_allocate(bytes) : nil
            isLarge = large != nil
            allocatedBytes = isLarge ? cs_large_allocation_size(bytes) : bytes
            memory = large ?? .allocate(byteCount: bytes, alignment: alignment)
            keys = memory.bindMemory(to: Digest.self, capacity: slotCount)
            // A large allocation comes zeroed, and the vacant marker is all zero bits: writing it
            // again would touch every page of the keys before the first entry goes in.
            if !isLarge { keys.initialize(repeating: Digest.vacantMarker, count: slotCount) }
            values = (memory + valuesOffset).bindMemory(to: Value.self, capacity: slotCount)
        }

        /// Whether `memory` came from ``cs_large_allocate``.
        private let isLarge: Bool

        var slots: Slots { Slots(keys: keys, values: values, homeCount: homeCount, count: slotCount) }

        /// An independent copy with the same layout (so indices found in one hold in the other).
        func copy() -> Storage {
            let copy = Storage(homeCount: homeCount, slotCount: slotCount, limit: limit)
            copy.keys.update(from: keys, count: slotCount)
            if _isPOD(Value.self) {
                // Trivial values: copy the vacant slots' bytes too, in one pass.
                UnsafeMutableRawPointer(copy.values).copyMemory(from: values, byteCount: slotCount * MemoryLayout<Value>.stride)
            } else {
                for i in 0 ..< slotCount where !keys[i].isVacantMarker {
                    (copy.values + i).initialize(to: values[i])
                }
            }
            return copy
        }

        /// Forgets the values after they were moved elsewhere.
        func abandonValues() { valuesAbandoned = true }

        deinit {
            // Trivial values (BlobEntry) need no destruction: skip the sweep.
            if !_isPOD(Value.self) && !valuesAbandoned {
                for i in 0 ..< slotCount where !keys[i].isVacantMarker {
                    (values + i).deinitialize(count: 1)
                }
            }
            if isLarge {
                cs_large_free(memory, allocatedBytes)
            } else {
                memory.deallocate()
            }
        }
    }
}

extension Digest {
    /// All zero bits: marks a vacant slot. No content hashes to it in practice, but it is a legal
    /// key (anyone can type it), so the table keeps that key out of the slots.
    fileprivate static let vacantMarker = [UInt8](repeating: 0, count: Digest.byteCount).withUnsafeBytes { Digest(bytes: $0) }

    /// Checks one word first: a real key almost never has it zero.
    fileprivate var isVacantMarker: Bool { hashSeedWord == 0 && self == .vacantMarker }
}
