import Foundation

/// A key of ``SortedMap``: a node stores its keys' UTF-8 bytes back to back rather than one heap
/// object per key, and searches them as bytes where that gives the key type's own order.
protocol SortedMapKey: Comparable, Sendable {
    /// Calls `body` with the key's UTF-8 bytes. Where every byte of two keys is ASCII, the bytes'
    /// lexicographic order must be `<` and their equality `==`.
    func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R
    /// The key whose bytes are `bytes` (bytes that ``withUTF8Bytes(_:)`` gave).
    init(utf8Bytes bytes: UnsafeBufferPointer<UInt8>)
}

extension String: SortedMapKey {
    func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var native = self
        return try native.withUTF8(body)
    }

    init(utf8Bytes bytes: UnsafeBufferPointer<UInt8>) {
        self.init(decoding: bytes, as: UTF8.self)
    }
}

extension SortedMap {
    /// A node's keys, ascending, in one buffer: their count, where each key's bytes end, then the
    /// keys' UTF-8 bytes back to back.
    ///
    /// Keys as separate `String`s put each on its own heap object: a binary search touched ~5 of
    /// them, each on its own page (the record tree's lookups were TLB-bound: Docs/benchmarks/analysis.md §44), and copying a
    /// node retained each. Here a search reads one buffer, a copy is a copy of plain bytes, and a
    /// key costs its bytes and 4 more instead of a 16-byte `String` and, past 15 bytes, a heap
    /// object with a 32-byte header. A key handed out (iteration, a split's separator) is a new
    /// `String`.
    ///
    /// `String` orders canonically equivalent strings as equal ("\u{E9}" == "e\u{301}", the
    /// Kelvin sign == "K"), which bytes do not; both agree on ASCII. So the bytes decide a
    /// comparison only when both keys are ASCII, and `String` comparison decides otherwise.
    struct NodeKeys: RandomAccessCollection, ExpressibleByArrayLiteral, Sendable {
        /// A `UInt32` count, then per key a `UInt32` offset where its bytes end (counted from the
        /// first key's first byte, with ``nonASCII`` set for a key that is not all ASCII), then the
        /// bytes. Empty for no keys.
        private(set) var storage: ContiguousArray<UInt8> = []
        /// The flag in a key's end offset.
        private static var nonASCII: UInt32 { 1 << 31 }

        init() {}

        init(arrayLiteral keys: Key...) {
            for key in keys { append(key) }
        }

        var startIndex: Int { 0 }
        var endIndex: Int { storage.withUnsafeBufferPointer { View($0).count } }

        subscript(i: Int) -> Key {
            storage.withUnsafeBufferPointer { Key(utf8Bytes: View($0).key(i)) }
        }

        /// Reads a buffer laid out as ``storage``.
        private struct View {
            let buffer: UnsafeBufferPointer<UInt8>
            init(_ buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

            var count: Int {
                buffer.isEmpty ? 0 : Int(UnsafeRawBufferPointer(buffer).loadUnaligned(as: UInt32.self))
            }

            /// Key `i`'s end offset and flag.
            func entry(_ i: Int) -> UInt32 {
                UnsafeRawBufferPointer(buffer).loadUnaligned(fromByteOffset: 4 + 4 * i, as: UInt32.self)
            }

            func end(_ i: Int) -> Int { Int(entry(i) & ~nonASCII) }

            func start(_ i: Int) -> Int { i == 0 ? 0 : end(i - 1) }

            func isASCII(_ i: Int) -> Bool { entry(i) & nonASCII == 0 }

            /// Where the keys' bytes begin in the buffer, for `count` keys.
            static func bytesOffset(count: Int) -> Int { 4 + 4 * count }

            func key(_ i: Int) -> UnsafeBufferPointer<UInt8> {
                let base = Self.bytesOffset(count: count)
                return UnsafeBufferPointer(rebasing: buffer[(base + start(i)) ..< (base + end(i))])
            }
        }

        /// The first index whose key is `>= key`, and whether that key equals `key`.
        func index(of key: Key) -> (index: Int, found: Bool) {
            key.withUTF8Bytes { sought in
                guard Self.isASCII(sought) else { return keyIndex(of: key) }
                return storage.withUnsafeBufferPointer { buffer in
                    let keys = View(buffer)
                    /// How key `i` compares with the ASCII `key`: negative, zero or positive.
                    func compare(_ i: Int) -> Int {
                        guard keys.isASCII(i) else {
                            let other = self[i]
                            return other < key ? -1 : other == key ? 0 : 1
                        }
                        let bytes = keys.key(i)
                        let common = Swift.min(bytes.count, sought.count)
                        if common > 0 {
                            let order = memcmp(bytes.baseAddress!, sought.baseAddress!, common)
                            if order != 0 { return Int(order) }
                        }
                        return bytes.count - sought.count
                    }
                    var low = 0
                    var high = keys.count
                    while low < high {
                        let middle = (low + high) / 2
                        if compare(middle) < 0 { low = middle + 1 } else { high = middle }
                    }
                    return (low, low < keys.count && compare(low) == 0)
                }
            }
        }

        /// ``index(of:)`` by `Key`'s own comparison, for a key that is not ASCII.
        private func keyIndex(of key: Key) -> (index: Int, found: Bool) {
            var low = 0
            var high = count
            while low < high {
                let middle = (low + high) / 2
                if self[middle] < key { low = middle + 1 } else { high = middle }
            }
            return (low, low < count && self[low] == key)
        }

        private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            bytes.reduce(0, |) < 0x80
        }

        /// Inserts in place: the buffer grows (copied first if shared, as any array), then the
        /// bytes after the new key and the end offsets after its own move up.
        mutating func insert(_ key: Key, at i: Int) {
            let n = count
            key.withUTF8Bytes { key in
                let length = key.count
                let entry = Self.isASCII(key) ? 0 : Self.nonASCII
                // Room first: appending to a shared buffer too small copies it at its own size and
                // then again at twice that. A quarter more leaves room for a few more keys.
                let size = Swift.max(storage.count, 4) + 4 + length
                if storage.capacity < size { storage.reserveCapacity(size + size / 4) }
                if storage.isEmpty { storage.append(contentsOf: repeatElement(0, count: 4)) }
                storage.append(contentsOf: repeatElement(0, count: 4 + length))
                storage.withUnsafeMutableBufferPointer { buffer in
                    let keys = View(UnsafeBufferPointer(buffer))
                    let base = View.bytesOffset(count: n)
                    let start = keys.start(i)
                    let total = i == n ? start : keys.end(n - 1)
                    let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
                    // Right to left, so that nothing is overwritten before it has moved.
                    memmove(raw + base + 4 + start + length, raw + base + start, total - start)
                    memmove(raw + base + 4, raw + base, start)
                    memmove(raw + 4 + 4 * (i + 1), raw + 4 + 4 * i, 4 * (n - i))
                    UnsafeMutableRawBufferPointer(start: raw + base + 4 + start, count: length)
                        .copyMemory(from: UnsafeRawBufferPointer(key))  // the empty key may have no address
                    raw.storeBytes(of: UInt32(n + 1), toByteOffset: 0, as: UInt32.self)
                    raw.storeBytes(of: UInt32(start + length) | entry, toByteOffset: 4 + 4 * i, as: UInt32.self)
                    for j in (i + 1) ..< (n + 1) {
                        let moved = raw.loadUnaligned(fromByteOffset: 4 + 4 * j, as: UInt32.self)
                        raw.storeBytes(of: moved + UInt32(length), toByteOffset: 4 + 4 * j, as: UInt32.self)
                    }
                }
            }
        }

        mutating func append(_ key: Key) {
            insert(key, at: count)
        }

        /// Appends `other`'s keys, all above this node's.
        mutating func append(contentsOf other: NodeKeys) {
            self = joined(0 ..< count, other, 0 ..< other.count)
        }

        /// Removes in place, the reverse of ``insert(_:at:)``.
        @discardableResult
        mutating func remove(at i: Int) -> Key {
            let key = self[i]
            let n = count
            var length = 0
            storage.withUnsafeMutableBufferPointer { buffer in
                let keys = View(UnsafeBufferPointer(buffer))
                let base = View.bytesOffset(count: n)
                let (start, end, total) = (keys.start(i), keys.end(i), keys.end(n - 1))
                length = end - start
                let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
                // Left to right, so that nothing is overwritten before it has moved.
                memmove(raw + 4 + 4 * i, raw + 4 + 4 * (i + 1), 4 * (n - i - 1))
                memmove(raw + base - 4, raw + base, start)
                memmove(raw + base - 4 + start, raw + base + end, total - end)
                raw.storeBytes(of: UInt32(n - 1), toByteOffset: 0, as: UInt32.self)
                for j in i ..< (n - 1) {
                    let moved = raw.loadUnaligned(fromByteOffset: 4 + 4 * j, as: UInt32.self)
                    raw.storeBytes(of: moved - UInt32(length), toByteOffset: 4 + 4 * j, as: UInt32.self)
                }
            }
            storage.removeLast(4 + length)
            return key
        }

        mutating func removeFirst() -> Key { remove(at: 0) }

        mutating func removeLast() -> Key { remove(at: count - 1) }

        /// Puts `key` in place of key `i`, keeping the order (the caller's to ensure).
        mutating func replace(at i: Int, with key: Key) {
            remove(at: i)
            insert(key, at: i)
        }

        /// Removes the keys from `i` on and returns them.
        mutating func removeKeys(from i: Int) -> NodeKeys {
            let removed = joined(i ..< count)
            self = joined(0 ..< i)
            return removed
        }

        /// Gives back the room the buffer grew into beyond its count: for a node built once and
        /// kept (a checkpoint load), where doubling left up to half the buffer unused.
        mutating func releaseUnusedCapacity() {
            if storage.capacity > storage.count { self = joined(0 ..< count) }
        }

        /// Keys `range` of this node then keys `otherRange` of `other`, in a buffer of their size.
        private func joined(_ range: Range<Int>, _ other: NodeKeys = [], _ otherRange: Range<Int> = 0 ..< 0) -> NodeKeys {
            storage.withUnsafeBufferPointer { first in
                other.storage.withUnsafeBufferPointer { second in
                    Self(joining: [(View(first), range), (View(second), otherRange)])
                }
            }
        }

        /// The keys of `parts`, in order, in a buffer of their size.
        private init(joining parts: [(keys: View, range: Range<Int>)]) {
            let n = parts.reduce(0) { $0 + $1.range.count }
            guard n > 0 else { return }
            /// Where each part's bytes begin in its own buffer, and how many there are.
            let spans = parts.map { keys, range in
                range.isEmpty
                    ? (start: 0, count: 0)
                    : (start: keys.start(range.lowerBound), count: keys.end(range.upperBound - 1) - keys.start(range.lowerBound))
            }
            let base = View.bytesOffset(count: n)
            let size = base + spans.reduce(0) { $0 + $1.count }
            storage = ContiguousArray(unsafeUninitializedCapacity: size) { buffer, initialized in
                let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
                raw.storeBytes(of: UInt32(n), toByteOffset: 0, as: UInt32.self)
                var (key, byte) = (0, 0)
                for ((keys, range), span) in zip(parts, spans) where !range.isEmpty {
                    for i in range {
                        let entry = keys.entry(i) - UInt32(span.start) + UInt32(byte)
                        raw.storeBytes(of: entry, toByteOffset: 4 + 4 * key, as: UInt32.self)
                        key += 1
                    }
                    let from = keys.buffer.baseAddress! + View.bytesOffset(count: keys.count) + span.start
                    (raw + base + byte).copyMemory(from: from, byteCount: span.count)
                    byte += span.count
                }
                initialized = size
            }
        }

        /// Collects keys appended in ascending order for nodes built one after another (a checkpoint
        /// load): each node's keys then move into a buffer of their size once, rather than growing
        /// one in place key by key.
        struct Builder {
            private var bytes: ContiguousArray<UInt8> = []
            private var ends: ContiguousArray<UInt32> = []

            var count: Int { ends.count }

            mutating func append(_ key: Key) {
                key.withUTF8Bytes { key in
                    bytes.append(contentsOf: key)
                    ends.append(UInt32(bytes.count) | (NodeKeys.isASCII(key) ? 0 : NodeKeys.nonASCII))
                }
            }

            /// The keys appended since the last call; the builder is then empty.
            mutating func build() -> NodeKeys {
                defer {
                    bytes.removeAll(keepingCapacity: true)
                    ends.removeAll(keepingCapacity: true)
                }
                guard !ends.isEmpty else { return [] }
                var keys = NodeKeys()
                let base = View.bytesOffset(count: ends.count)
                keys.storage = ContiguousArray(unsafeUninitializedCapacity: base + bytes.count) { buffer, initialized in
                    let raw = UnsafeMutableRawBufferPointer(buffer)
                    raw.storeBytes(of: UInt32(ends.count), toByteOffset: 0, as: UInt32.self)
                    ends.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[4 ..< base]).copyMemory(from: $0) }
                    // Empty when the node's one key is the empty key.
                    bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[base...]).copyMemory(from: $0) }
                    initialized = base + bytes.count
                }
                return keys
            }
        }
    }
}
