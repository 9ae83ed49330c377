// Owns: a body's canonical JSON written straight into bytes, byte for byte what `BodyCoding`'s
// `JSONEncoder` (sorted keys, slashes unescaped, dates deferred to `Date`) writes for the same value.
//
// Why: Foundation's encoder builds a tree of boxed values and string-keyed dictionaries, casts every
// value to its special types and keeps a coding path, for bodies that are a few fields; that was
// the largest piece of a write's own CPU beside the commit (Docs/benchmarks/analysis.md). Here a
// value is encoded in one pass: members go into the output as they come, and an object's members
// are put in key order (UTF-8 byte order, as `JSONEncoder` sorts on Linux) when its `encode(to:)`
// returns. Bodies must stay byte-identical to what earlier versions stored, or a save of an
// unchanged entity would stop being a no-op on an old store, so whatever this path does not mirror
// exactly (`Data`, `URL` and `Decimal`, which `JSONEncoder` special-cases; nested containers and
// super-encoders; a value that encodes nothing; a non-finite number; any thrown error) makes it
// give up, and the caller encodes with `JSONEncoder` as before. `CanonicalJSONTests` checks the
// identity against `JSONEncoder` on random values.
import Foundation

enum CanonicalJSON {
    /// The canonical JSON of `value`, or nil when this path does not cover it (use `JSONEncoder`).
    static func encode<T: Encodable>(_ value: T) -> [UInt8]? {
        let writer = CanonicalJSONWriter()
        do {
            try writer.encodeValue(value)
        } catch {
            return nil
        }
        return writer.failed ? nil : writer.bytes
    }
}

/// The encoder, and the state of every value being encoded. Values are encoded depth first, one
/// at a time: a container writes only while its value is the innermost being encoded, which is
/// what lets members go straight into ``bytes``.
final class CanonicalJSONWriter: Encoder {
    struct Unsupported: Error {}

    /// One value whose `encode(to:)` is running.
    struct Level {
        enum Kind { case none, single, keyed, unkeyed }
        var kind = Kind.none
        /// Where the value's bytes start in ``CanonicalJSONWriter/bytes``.
        let start: Int
        /// Where its members start in ``CanonicalJSONWriter/members`` (keyed).
        let membersStart: Int
        /// Elements written (unkeyed), or whether the value was written (single).
        var count = 0
    }

    var bytes: [UInt8] = []
    /// Set when the value needs what this path does not mirror; the output is then discarded.
    private(set) var failed = false
    private var levels: [Level] = []
    /// The members of every open object, in the order written: the key and where its `"key":value`
    /// starts (it ends where the next one starts, or at the end of the bytes).
    private var members: [(key: String, start: Int)] = []

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init() {
        bytes.reserveCapacity(256)
        levels.reserveCapacity(8)
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let depth = levels.count - 1
        if depth >= 0, levels[depth].kind == .none {
            levels[depth].kind = .keyed
        } else if depth < 0 || levels[depth].kind != .keyed {
            failed = true
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(writer: self, depth: depth))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let depth = levels.count - 1
        if depth >= 0, levels[depth].kind == .none {
            levels[depth].kind = .unkeyed
            bytes.append(UInt8(ascii: "["))
        } else {
            failed = true
        }
        return UnkeyedContainer(writer: self, depth: depth)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        let depth = levels.count - 1
        if depth >= 0, levels[depth].kind == .none {
            levels[depth].kind = .single
        } else {
            failed = true
        }
        return SingleContainer(writer: self, depth: depth)
    }

    // MARK: Values

    /// Writes `value`: the types JSON writes directly here, any other through its `encode(to:)`.
    func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == String.self { return writeString(unsafeBitCast(value, to: String.self)) }
        if T.self == Double.self { return try writeFloat(unsafeBitCast(value, to: Double.self)) }
        if T.self == Int.self { return writeInteger(unsafeBitCast(value, to: Int.self)) }
        if T.self == Bool.self { return writeBool(unsafeBitCast(value, to: Bool.self)) }
        if T.self == UUID.self { return writeUUID(unsafeBitCast(value, to: UUID.self)) }
        // `Date.encode(to:)` writes its seconds since the reference date, as the deferred strategy asks.
        if T.self == Date.self { return try writeFloat(unsafeBitCast(value, to: Date.self).timeIntervalSinceReferenceDate) }
        if T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw fail() }
        levels.append(Level(start: bytes.count, membersStart: members.count))
        try value.encode(to: self)
        try close(levels.removeLast())
    }

    /// Ends a value whose `encode(to:)` returned: an object's members in key order, an array's bracket.
    private func close(_ level: Level) throws {
        switch level.kind {
        case .none: throw fail()  // JSONEncoder has its own rules for a value that encodes nothing
        case .single: if level.count == 0 { throw fail() }
        case .unkeyed: bytes.append(UInt8(ascii: "]"))
        case .keyed: closeObject(level)
        }
    }

    /// Rewrites the members written since `level.start` as an object, sorted by key; of a key written
    /// twice the last value counts, as in `JSONEncoder`'s dictionary. The order and the object are
    /// built in temporary buffers (on the stack for a body's few members): two arrays here were two
    /// allocations per object.
    private func closeObject(_ level: Level) {
        let count = members.count - level.membersStart
        withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { order in
            // Insertion sort, stable: an object has few members, often nearly in order.
            for offset in 0 ..< count {
                var position = offset
                while position > 0, precedes(level.membersStart + offset, order[position - 1]) { position -= 1 }
                if position < offset {
                    (order.baseAddress! + position + 1).moveInitialize(from: order.baseAddress! + position, count: offset - position)
                }
                (order.baseAddress! + position).initialize(to: level.membersStart + offset)
            }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bytes.count - level.start + count + 2) { object in
                object[0] = UInt8(ascii: "{")
                var length = 1
                for position in 0 ..< count {
                    let index = order[position]
                    if position + 1 < count, members[order[position + 1]].key == members[index].key { continue }
                    if length > 1 {
                        object[length] = UInt8(ascii: ",")
                        length += 1
                    }
                    let (start, end) = (members[index].start, index + 1 < members.endIndex ? members[index + 1].start : bytes.count)
                    bytes.withUnsafeBufferPointer { (object.baseAddress! + length).initialize(from: $0.baseAddress! + start, count: end - start) }
                    length += end - start
                }
                object[length] = UInt8(ascii: "}")
                bytes.replaceSubrange(level.start..., with: UnsafeBufferPointer(rebasing: object[...length]))
            }
        }
        members.removeSubrange(level.membersStart...)
    }

    /// Whether member `a` goes before member `b`: by key in UTF-8 byte order, then as written.
    private func precedes(_ a: Int, _ b: Int) -> Bool {
        let (keyA, keyB) = (members[a].key, members[b].key)
        if keyA == keyB { return a < b }
        return keyA.utf8.lexicographicallyPrecedes(keyB.utf8)
    }

    /// Marks the value as not covered and returns the error that unwinds its encoding.
    func fail() -> Unsupported {
        failed = true
        return Unsupported()
    }

    /// Whether a container made at `depth` may write now: its value is the innermost being encoded,
    /// and nothing has given up.
    func mayWrite(at depth: Int) -> Bool {
        !failed && depth >= 0 && depth == levels.count - 1
    }

    /// Starts an object member: its key, escaped, and the colon.
    func beginMember(_ key: String, depth: Int) throws {
        guard mayWrite(at: depth) else { throw fail() }
        members.append((key, bytes.count))
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Starts an array element: the comma before every one but the first.
    func beginElement(depth: Int) throws {
        guard mayWrite(at: depth) else { throw fail() }
        if levels[depth].count > 0 { bytes.append(UInt8(ascii: ",")) }
        levels[depth].count += 1
    }

    /// Starts a single value, which may be written once.
    func beginSingle(depth: Int) throws {
        guard mayWrite(at: depth), levels[depth].count == 0 else { throw fail() }
        levels[depth].count = 1
    }

    /// Elements an array container at `depth` has written.
    func elementCount(at depth: Int) -> Int {
        depth >= 0 && depth < levels.count ? levels[depth].count : 0
    }

    // MARK: Scalars

    func writeNull() { bytes.append(contentsOf: "null".utf8) }

    func writeBool(_ value: Bool) { bytes.append(contentsOf: (value ? "true" : "false").utf8) }

    func writeInteger<I: FixedWidthInteger>(_ value: I) { bytes.append(contentsOf: value.description.utf8) }

    /// A finite `Double` as `JSONEncoder` writes it. A whole one below 2^53 in magnitude (a count,
    /// an amount, a date in whole seconds) is its integer's digits: its `description` is those
    /// digits and ".0", and formatting the float costs several times more (`-0.0` keeps its sign,
    /// and from 2^53 on `description` turns to exponents, so both take the general path).
    func writeFloat(_ value: Double) throws {
        guard let whole = Int64(exactly: value), whole.magnitude < Self.wholeDoubleLimit, whole != 0 || value.sign == .plus else {
            return try writeFloatText(value)
        }
        writeDigits(of: whole)
    }

    /// Whole doubles below this in magnitude are written as integers (``writeFloat(_:)``).
    private static let wholeDoubleLimit: UInt64 = 1 << 53

    /// `value`'s decimal digits, after a minus sign when it is negative: formatted backwards on the
    /// stack, then appended at once (an append per digit to ``bytes`` cost more than the float's
    /// formatting).
    private func writeDigits(of value: Int64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var start = buffer.endIndex
            var magnitude = value.magnitude
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                buffer[start] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// A finite number as `JSONEncoder` writes it: its `description` without a trailing ".0".
    func writeFloat<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F) throws {
        try writeFloatText(value)
    }

    private func writeFloatText<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F) throws {
        guard value.isFinite else { throw fail() }  // JSONEncoder's error, or its strategy, decides
        var text = value.description
        // On the UTF-8 bytes: `String`'s own suffix and removal work on characters.
        text.withUTF8 { utf8 in
            let whole = utf8.count >= 2 && utf8[utf8.count - 2] == UInt8(ascii: ".") && utf8[utf8.count - 1] == UInt8(ascii: "0")
            bytes.append(contentsOf: whole ? UnsafeBufferPointer(rebasing: utf8.dropLast(2)) : utf8)
        }
    }

    /// A UUID's `uuidString`, quoted: hex digits and dashes, which need no escaping.
    func writeUUID(_ uuid: UUID) {
        bytes.append(UInt8(ascii: "\""))
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: 36))
        bytes.withUnsafeMutableBufferPointer { uuid.writeText(to: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A string, quoted, escaped as `JSONEncoder` escapes with `.withoutEscapingSlashes`: `"`, `\`
    /// and the control characters, named where JSON has a name, else `\u00xx` in lowercase hex.
    func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            guard utf8.contains(where: Self.needsEscape) else { return bytes.append(contentsOf: utf8) }
            for byte in utf8 {
                guard Self.needsEscape(byte) else {
                    bytes.append(byte)
                    continue
                }
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    bytes.append(contentsOf: "u00".utf8)
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0x0F)])
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
