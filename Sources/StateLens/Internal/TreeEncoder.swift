import Foundation
import Synchronization

// Encodes a value into a StateNode tree, the canonical JSON (keys sorted by UTF-8 bytes; Data as
// base64, URL as its absolute string, Decimal as a number, as JSONEncoder's defaults do, so that
// JSONDecoder reads it back). The point of a custom encoder: an update re-encodes only what changed.
// Each value is compared (`==`, when it is Equatable) with the value the previous tree's node at the
// same coding path was built from, and an equal one reuses that node whole. Copy-on-write storage
// makes the comparison of an untouched array or string one pointer test, so updating one field of a
// large state costs the path to that field, not the state's size.

enum TreeEncoder {
    /// The tree of `value`, reusing the nodes of `previous` (the tree of the last version) where the
    /// values are equal.
    static func encode<T: Encodable>(_ value: T, previous: StateNode?) throws -> StateNode {
        try encodeValue(value, previous: previous, codingPath: [])
    }

    /// ``encode(_:previous:)`` of a value its caller has already found unequal to the one
    /// `previous` was built from (an update compares the roots to skip equal ones): the root's `==`,
    /// which walks a large array up to its change, is not run a second time.
    static func encode<T: Encodable>(_ value: T, changedFrom previous: StateNode?) throws -> StateNode {
        try encodeValue(value, previous: previous, codingPath: [], compared: true)
    }

    static func encodeValue<T: Encodable>(_ value: T, previous: StateNode?, codingPath: [any CodingKey], compared: Bool = false) throws -> StateNode {
        // A container compares itself with the previous version's (and returns `previous` when
        // equal): an array in a cheaper way than `==`, which compares element by element up to the
        // change once an update has copied the buffer.
        let traits = EncodingTraits.of(value)
        if traits.isMemoizedContainer, let container = value as? any MemoizedContainer {
            return try container.encodeNode(previous: previous, codingPath: codingPath)
        }
        if !compared, traits.isEquatable, let previous, let source = previous.source, Equality.equal(value, any: source) { return previous }
        let source: Any? = traits.isEquatable ? value : nil
        if traits.isFoundationScalar, let json = foundationJSON(value) { return .scalar(json, source: source) }
        let encoder = NodeEncoder(previous: previous, codingPath: codingPath)
        try value.encode(to: encoder)
        return try encoder.storage.node(source: source, previous: previous, codingPath: codingPath)
    }

    /// The JSON text `JSONEncoder` gives `Data`, `URL` and `Decimal` by default; nil for another type.
    private static func foundationJSON(_ value: Any) -> [UInt8]? {
        switch value {
        case let data as Data: JSONText.string(data.base64EncodedString())
        case let url as URL: JSONText.string(url.absoluteString)
        case let decimal as Decimal: Array(decimal.description.utf8)
        default: nil
        }
    }
}

/// What ``TreeEncoder/encodeValue(_:previous:codingPath:compared:)`` asks of a value's type,
/// found once per type: a cast to a protocol (`as? any MemoizedContainer`, `is any Equatable`) that
/// fails looks through the conformances every time, and an update asked it of the root and of
/// every value on the path to its change.
struct EncodingTraits: Sendable {
    var isMemoizedContainer: Bool
    var isEquatable: Bool
    /// `Data`, `URL` or `Decimal`, which have a JSON form of their own: other types skip the three casts.
    var isFoundationScalar: Bool

    private static let known = Mutex<[ObjectIdentifier: EncodingTraits]>([:])

    /// The traits of `value`'s dynamic type (a subclass may conform where its superclass does not).
    static func of<T>(_ value: T) -> EncodingTraits {
        let type = ObjectIdentifier(Swift.type(of: value))
        if let traits = known.withLock({ $0[type] }) { return traits }
        let traits = EncodingTraits(isMemoizedContainer: value is any MemoizedContainer, isEquatable: value is any Equatable,
                                    isFoundationScalar: value is Data || value is URL || value is Decimal)
        known.withLock { $0[type] = traits }
        return traits
    }
}

/// Arrays and string-keyed dictionaries of `Equatable` values, encoded without their own
/// `encode(to:)`: each element is compared with the previous container's element at the same index
/// or key with the element type's own `==`, so an array of a thousand elements that differs in one
/// costs a thousand typed comparisons, not a thousand boxings into `any Equatable`. A container
/// equal to the previous one encodes to the previous node itself.
protocol MemoizedContainer {
    func encodeNode(previous: StateNode?, codingPath: [any CodingKey]) throws -> StateNode
}

extension Array: MemoizedContainer where Element: Encodable & Equatable {
    func encodeNode(previous: StateNode?, codingPath: [any CodingKey]) throws -> StateNode {
        let old = previous?.source as? [Element]
        let oldCount = previous?.elementCount ?? 0
        // The elements an update only copied (its body changed one and the array was copied on
        // write) keep their nodes without a call to `==`, and a large array's chunks that hold only
        // such elements are taken whole: so an update of one element of a large array costs a
        // memory comparison of the two buffers and the changed chunk, not a step per element.
        let (prefix, suffix) = old.flatMap { $0.count == oldCount ? Bitwise.unchangedEnds(of: $0, and: self) : nil } ?? (0, 0)
        var middle: [StateNode] = []
        middle.reserveCapacity(count - prefix - suffix)
        var unchanged = old != nil && count == oldCount
        for index in prefix ..< count - suffix {
            let element = self[index]
            let oldNode = index < oldCount ? previous?.child(at: index) : nil
            let oldElement = old.flatMap { index < $0.count ? $0[index] : nil }
            if let oldElement, let oldNode, oldElement == element {
                middle.append(oldNode)
            } else {
                // An element found unequal to the one its old node was built from is not compared again.
                let compared = oldElement != nil && oldNode != nil
                middle.append(try TreeEncoder.encodeValue(element, previous: oldNode, codingPath: codingPath + [IndexKey(index)], compared: compared))
                unchanged = false
            }
        }
        if unchanged, let previous { return previous }
        return .array(splicing: middle, prefix: prefix, suffix: suffix, of: previous, source: self)
    }
}

/// Comparisons of values' bytes. Two values with the same bytes are the same value (the same
/// scalars, the same references to the same storage), so they encode alike: their node can be
/// reused without asking `==`. Values that are equal with different bytes (a string rebuilt, a
/// padding byte) are only not recognized here, and `==` decides for them as before.
enum Bitwise {
    /// How many elements at the start and, after those, at the end of `new` have the bytes of the
    /// elements at the same place from the same end of `old`.
    static func unchangedEnds<Element>(of old: [Element], and new: [Element]) -> (prefix: Int, suffix: Int) {
        let size = MemoryLayout<Element>.size
        let stride = MemoryLayout<Element>.stride
        let run = 32
        guard size > 0 else { return (0, 0) }
        return old.withUnsafeBytes { old in
            new.withUnsafeBytes { new in
                let oldCount = old.count / stride
                let newCount = new.count / stride
                let limit = min(oldCount, newCount)
                func same(_ oldIndex: Int, _ newIndex: Int) -> Bool {
                    memcmp(old.baseAddress! + oldIndex * stride, new.baseAddress! + newIndex * stride, size) == 0
                }
                // Whole runs of elements are compared with one memcmp first; a run that differs
                // (in an element, or only in padding between elements) is then compared element by
                // element, so padding can cost speed but never a wrong answer.
                func sameRun(_ oldIndex: Int, _ newIndex: Int) -> Bool {
                    memcmp(old.baseAddress! + oldIndex * stride, new.baseAddress! + newIndex * stride, run * stride) == 0
                }
                var prefix = 0
                while prefix + run <= limit, sameRun(prefix, prefix) { prefix += run }
                while prefix < limit, same(prefix, prefix) { prefix += 1 }
                var suffix = 0
                while prefix + suffix + run <= limit, sameRun(oldCount - suffix - run, newCount - suffix - run) { suffix += run }
                while prefix + suffix < limit, same(oldCount - 1 - suffix, newCount - 1 - suffix) { suffix += 1 }
                return (prefix, suffix)
            }
        }
    }
}

extension Dictionary: MemoizedContainer where Key == String, Value: Encodable & Equatable {
    func encodeNode(previous: StateNode?, codingPath: [any CodingKey]) throws -> StateNode {
        let old = previous?.source as? [String: Value]
        if let previous, old == self { return previous }
        var members: [(key: String, node: StateNode)] = []
        members.reserveCapacity(count)
        for (key, value) in self {
            let oldNode = previous?.child(forKey: key)
            let oldValue = old?[key]
            if let oldValue, let oldNode, oldValue == value {
                members.append((key, oldNode))
            } else {
                // As for an array's element: a value found unequal is not compared again.
                let compared = oldValue != nil && oldNode != nil
                members.append((key, try TreeEncoder.encodeValue(value, previous: oldNode, codingPath: codingPath + [StringKey(key)], compared: compared)))
            }
        }
        return .object(members, source: self, previous: previous)
    }
}

struct StringKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// What one encoder (one coding path) was given.
final class NodeStorage {
    enum Content {
        case empty
        case scalar([UInt8])
        case node(StateNode)
        case object(ObjectBuilder)
        case array(ArrayBuilder)
    }

    var content: Content = .empty

    func node(source: Any?, previous: StateNode?, codingPath: [any CodingKey]) throws -> StateNode {
        switch content {
        case .empty:
            // As JSONEncoder: a value that encodes nothing is an empty object.
            return .object([], source: source, previous: previous)
        case let .scalar(json): return .scalar(json, source: source)
        case let .node(node): return node
        case let .object(builder): return try builder.node(source: source, previous: previous)
        case let .array(builder): return try builder.node(source: source, previous: previous)
        }
    }
}

/// A member or element not finished yet: a node, or a nested container or encoder.
enum PendingChild {
    case node(StateNode)
    case storage(NodeStorage, previous: StateNode?, codingPath: [any CodingKey])

    func node() throws -> StateNode {
        switch self {
        case let .node(node): return node
        case let .storage(storage, previous, path): return try storage.node(source: nil, previous: previous, codingPath: path)
        }
    }
}

/// An object's members in the order encoded. An array, not a dictionary keyed by name: a
/// struct's handful of members cost a dictionary's allocation and a hash per member on every
/// update of each object on the path to the change, and a key encoded twice is rare.
final class ObjectBuilder {
    private(set) var members: [(key: String, child: PendingChild)] = []

    func set(_ child: PendingChild, forKey key: String) {
        members.append((key, child))
    }

    func node(source: Any?, previous: StateNode?) throws -> StateNode {
        .object(try uniqueMembers.map { ($0.key, try $0.child.node()) }, source: source, previous: previous)
    }

    /// The members with each key once: the last value encoded under a key wins, as in `JSONEncoder`.
    private var uniqueMembers: [(key: String, child: PendingChild)] {
        guard hasDuplicateKeys else { return members }
        var seen = Set<String>()
        return Array(members.reversed().filter { seen.insert($0.key).inserted }.reversed())
    }

    /// Whether a key was encoded twice: a struct's few keys are compared pairwise, which costs
    /// less than the set it would take.
    private var hasDuplicateKeys: Bool {
        guard members.count > 16 else {
            for index in members.indices where members[(index + 1)...].contains(where: { $0.key == members[index].key }) { return true }
            return false
        }
        return Set(members.lazy.map(\.key)).count != members.count
    }
}

final class ArrayBuilder {
    var elements: [PendingChild] = []

    func node(source: Any?, previous: StateNode?) throws -> StateNode {
        .array(try elements.map { try $0.node() }, source: source, previous: previous)
    }
}

struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

final class NodeEncoder: Encoder {
    let storage = NodeStorage()
    let previous: StateNode?
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(previous: StateNode?, codingPath: [any CodingKey]) {
        self.previous = previous
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedNodeContainer<Key>(builder: objectBuilder(), previous: previous, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedNodeContainer(builder: arrayBuilder(), previous: previous, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(encoder: self)
    }

    private func objectBuilder() -> ObjectBuilder {
        if case let .object(builder) = storage.content { return builder }
        let builder = ObjectBuilder()
        storage.content = .object(builder)
        return builder
    }

    private func arrayBuilder() -> ArrayBuilder {
        if case let .array(builder) = storage.content { return builder }
        let builder = ArrayBuilder()
        storage.content = .array(builder)
        return builder
    }
}

struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let builder: ObjectBuilder
    let previous: StateNode?
    let codingPath: [any CodingKey]

    private func set(_ json: [UInt8], _ key: Key) {
        builder.set(.node(.scalar(json, source: nil)), forKey: key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws { set(Array("null".utf8), key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(Array((value ? "true" : "false").utf8), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(JSONText.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try JSONText.number(value, codingPath: codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try JSONText.number(value, codingPath: codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(Array(String(value).utf8), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(Array(String(value).utf8), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        let node = try TreeEncoder.encodeValue(value, previous: previous?.child(forKey: key.stringValue), codingPath: codingPath + [key])
        builder.set(.node(node), forKey: key.stringValue)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = NodeEncoder(previous: previous?.child(forKey: key.stringValue), codingPath: codingPath + [key])
        builder.set(.storage(child.storage, previous: child.previous, codingPath: child.codingPath), forKey: key.stringValue)
        return child.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = NodeEncoder(previous: previous?.child(forKey: key.stringValue), codingPath: codingPath + [key])
        builder.set(.storage(child.storage, previous: child.previous, codingPath: child.codingPath), forKey: key.stringValue)
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }

    private func superEncoder(named name: String) -> any Encoder {
        let child = NodeEncoder(previous: nil, codingPath: codingPath)
        builder.set(.storage(child.storage, previous: nil, codingPath: codingPath), forKey: name)
        return child
    }
}

struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let builder: ArrayBuilder
    let previous: StateNode?
    let codingPath: [any CodingKey]
    var count: Int { builder.elements.count }

    private func append(_ json: [UInt8]) { builder.elements.append(.node(.scalar(json, source: nil))) }
    private var nextKey: any CodingKey { IndexKey(count) }

    mutating func encodeNil() throws { append(Array("null".utf8)) }
    mutating func encode(_ value: Bool) throws { append(Array((value ? "true" : "false").utf8)) }
    mutating func encode(_ value: String) throws { append(JSONText.string(value)) }
    mutating func encode(_ value: Double) throws { append(try JSONText.number(value, codingPath: codingPath + [nextKey])) }
    mutating func encode(_ value: Float) throws { append(try JSONText.number(value, codingPath: codingPath + [nextKey])) }
    mutating func encode(_ value: Int) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: Int8) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: Int16) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: Int32) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: Int64) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt8) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt16) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt32) throws { append(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt64) throws { append(Array(String(value).utf8)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let node = try TreeEncoder.encodeValue(value, previous: previous?.child(at: count), codingPath: codingPath + [nextKey])
        builder.elements.append(.node(node))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = NodeEncoder(previous: previous?.child(at: count), codingPath: codingPath + [nextKey])
        builder.elements.append(.storage(child.storage, previous: child.previous, codingPath: child.codingPath))
        return child.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = NodeEncoder(previous: previous?.child(at: count), codingPath: codingPath + [nextKey])
        builder.elements.append(.storage(child.storage, previous: child.previous, codingPath: child.codingPath))
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = NodeEncoder(previous: nil, codingPath: codingPath + [nextKey])
        builder.elements.append(.storage(child.storage, previous: nil, codingPath: child.codingPath))
        return child
    }
}

struct SingleNodeContainer: SingleValueEncodingContainer {
    let encoder: NodeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ json: [UInt8]) { encoder.storage.content = .scalar(json) }

    mutating func encodeNil() throws { set(Array("null".utf8)) }
    mutating func encode(_ value: Bool) throws { set(Array((value ? "true" : "false").utf8)) }
    mutating func encode(_ value: String) throws { set(JSONText.string(value)) }
    mutating func encode(_ value: Double) throws { set(try JSONText.number(value, codingPath: codingPath)) }
    mutating func encode(_ value: Float) throws { set(try JSONText.number(value, codingPath: codingPath)) }
    mutating func encode(_ value: Int) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: Int8) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: Int16) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: Int32) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: Int64) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt8) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt16) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt32) throws { set(Array(String(value).utf8)) }
    mutating func encode(_ value: UInt64) throws { set(Array(String(value).utf8)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.storage.content = .node(try TreeEncoder.encodeValue(value, previous: encoder.previous, codingPath: codingPath))
    }
}
