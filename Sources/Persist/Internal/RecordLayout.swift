// The record layout of one persister: the only file that knows Persist's keys and record bytes.
// See Docs/persist.md, which gives the same layout with examples.
//
// Every key of a persister named N starts with `persist/<esc N>/`, where `esc` replaces `%` with
// `%25` and `/` with `%2F`, so one persister's keys are never a prefix of another's. Below it
// (UUIDs are `uuidString`, 36 uppercase characters, so key order is ID order):
//
//   head                          Head: where the history stands (absent = a fresh persister)
//   e/<id>                        EntityRecord: the entity's name; references [body]
//   t/<esc entityName>/<id>       empty: the type index fetchAll reads
//   r/<source>/<esc relation>/<target>   RelationRecord: order and cascade flag
//   b/<target>/<source>/<esc relation>   empty: the reverse index delete reads
//   s/<position: 16 hex digits>   StepRecord: one undo step; references [diff, bodies...]
//
// Record values are little-endian (ContentStore's `ByteWriter`) and start with
// `[format version: u8 = 1][kind: u8]`. Strings and byte strings are a u32 length and the bytes.
//
//   Head          kind 'H'  changeCount u64, nextSequence u64, first u64, cursor u64, last u64
//   EntityRecord  kind 'E'  entityName string                     references: [body]
//   RelationRecord kind 'R' flags u8 (bit 0: cascadeDelete), order u64, index u32
//   StepRecord    kind 'S'  sequence u64, date (Float64 bits of timeIntervalSinceReferenceDate) u64,
//                           hasActionName u8, [actionName string]
//                 format 1: references: [diff blob, then every distinct digest the diff names, ascending]
//                 format 2: then the diff's bytes (u32 length, bytes), inline: a step whose diff is at
//                           most 4 KiB (Diff.inlineLimit); references: every distinct digest the diff
//                           names, ascending. Both are read; format 2 is written for small diffs, so
//                           a small write or undo puts no blob and reads none.
//   Diff (a blob) kind 'D'  change count u32, then per change, in key order:
//                           key string, before: RecordImage, after: RecordImage
//   RecordImage             present u8 (0 = no record), [value bytes, reference count u32, digests (32 bytes each)]
//
// A body is the entity's canonical JSON (sorted keys), stored as a blob: equal bodies are stored
// once, and an undo step holds digests, not copies.
import ContentStore
import Foundation

/// The keys of one persister.
struct Layout: Sendable {
    /// `persist/<esc name>/`.
    let prefix: String
    /// Made once: each is longer than a small string, so joining it per use was an allocation,
    /// several in every write (the head is read and written, an entity's and a step's key made).
    let head: String
    let entityPrefix: String
    let stepPrefix: String

    init(name: String) {
        prefix = "persist/" + Names.escape(name) + "/"
        head = prefix + "head"
        entityPrefix = prefix + "e/"
        stepPrefix = prefix + "s/"
    }

    func entity(_ id: UUID) -> String { entityPrefix + id.text }
    func typeIndexPrefix(_ entityName: String) -> String { prefix + "t/" + Names.escape(entityName) + "/" }
    func typeIndex(_ entityName: String, _ id: UUID) -> String { typeIndexPrefix(entityName) + id.text }

    func relationsPrefix(from source: UUID) -> String { prefix + "r/" + source.text + "/" }
    func relationsPrefix(from source: UUID, as relation: String) -> String {
        relationsPrefix(from: source) + Names.escape(relation) + "/"
    }
    func relation(from source: UUID, to target: UUID, as relation: String) -> String {
        relationsPrefix(from: source, as: relation) + target.text
    }
    func backlinksPrefix(to target: UUID) -> String { prefix + "b/" + target.text + "/" }
    func backlink(from source: UUID, to target: UUID, as relation: String) -> String {
        backlinksPrefix(to: target) + source.text + "/" + Names.escape(relation)
    }

    /// The key of the step at `position`: 16 lowercase hex digits, zero-padded, formatted in place
    /// (`String(_:radix:)` and a padding string were a share of every write's step record).
    func step(_ position: UInt64) -> String {
        let digits: StaticString = "0123456789abcdef"
        return stepPrefix + String(unsafeUninitializedCapacity: 16) { buffer in
            for index in 0 ..< 16 { buffer[index] = digits.utf8Start[Int(position >> UInt64(60 - 4 * index) & 0xF)] }
            return 16
        }
    }

    /// The entities a diff saved or deleted, and both ends of the relations it made or removed.
    func changedEntities(in diff: Diff) -> Set<UUID> {
        var changed = Set<UUID>()
        for change in diff.changes {
            switch parse(change.key) {
            case .entity(let id): changed.insert(id)
            case .relation(let source, _, let target): changed.formUnion([source, target])
            case .backlink, .other: break
            }
        }
        return changed
    }

    /// What a key under ``prefix`` names, for undo steps' `changed` sets and for delete.
    enum Parsed: Equatable {
        case entity(UUID)
        case relation(source: UUID, relation: String, target: UUID)
        case backlink(target: UUID, source: UUID, relation: String)
        case other
    }

    func parse(_ key: String) -> Parsed {
        // Bytes, not characters: every key under the prefix was made by appending to it.
        guard key.utf8.starts(with: prefix.utf8) else { return .other }
        let rest = key[key.utf8.index(key.startIndex, offsetBy: prefix.utf8.count)...]
        // An entity's key, the one every save changes, without splitting: `e/` and 36 characters.
        if rest.utf8.count == 2 + 36, rest.utf8.starts(with: "e/".utf8) {
            return String(rest.utf8.dropFirst(2)).flatMap(UUID.init(uuidString:)).map(Parsed.entity) ?? .other
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        switch (parts.first, parts.count) {
        case ("e", 2):
            return UUID(uuidString: String(parts[1])).map(Parsed.entity) ?? .other
        case ("r", 4):
            guard let source = UUID(uuidString: String(parts[1])), let target = UUID(uuidString: String(parts[3])),
                  let relation = Names.unescape(parts[2]) else { return .other }
            return .relation(source: source, relation: relation, target: target)
        case ("b", 4):
            guard let target = UUID(uuidString: String(parts[1])), let source = UUID(uuidString: String(parts[2])),
                  let relation = Names.unescape(parts[3]) else { return .other }
            return .backlink(target: target, source: source, relation: relation)
        default:
            return .other
        }
    }
}

/// Names of persisters, entities and relations: non-empty UTF-8 without NUL, at most 256 bytes.
enum Names {
    static let maximumLength = 256

    static func validate(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= maximumLength, !name.utf8.contains(0) else {
            throw PersistError.invalidName(name)
        }
    }

    static func escape(_ name: String) -> String {
        guard name.contains(where: { $0 == "%" || $0 == "/" }) else { return name }
        return name.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
    }

    static func unescape(_ escaped: Substring) -> String? {
        guard escaped.contains("%") else { return String(escaped) }
        return String(escaped).replacingOccurrences(of: "%2F", with: "/").replacingOccurrences(of: "%25", with: "%")
    }
}

/// The record format's constants and its one error.
enum RecordFormat {
    static let version: UInt8 = 1
    static let maximumStringLength = 1 << 24
    /// A SHA-256 digest as stored: 32 bytes.
    static let digestLength = 32

    enum Kind: UInt8 {
        case head = 0x48       // "H"
        case entity = 0x45     // "E"
        case relation = 0x52   // "R"
        case step = 0x53       // "S"
        case diff = 0x44       // "D"
    }

    static func corrupted(_ what: String, key: String) -> StoreError {
        StoreError(code: .corrupted, message: "Persist record \"\(key)\" is malformed: \(what)")
    }

    static func writer(_ kind: Kind, capacity: Int = 64, version: UInt8 = version) -> ByteWriter {
        var writer = ByteWriter(capacity: capacity)
        writer.append(version)
        writer.append(kind.rawValue)
        return writer
    }

    /// Decodes `data` (the value of `key`, or a blob it references) as a `kind`, with `body`
    /// reading the fields; every malformation becomes one `corrupted` error naming the key.
    static func decode<T>(_ data: Data, as kind: Kind, key: String, _ body: (inout ByteReader) throws -> T) throws -> T {
        try decode(data, as: kind, key: key, versions: version ... version) { reader, _ in try body(&reader) }
    }

    /// ``decode(_:as:key:_:)`` of a kind written in several format versions: `body` is told which.
    static func decode<T>(_ data: Data, as kind: Kind, key: String, versions: ClosedRange<UInt8>,
                          _ body: (inout ByteReader, UInt8) throws -> T) throws -> T {
        try data.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                let version: UInt8 = try reader.read()
                guard versions.contains(version) else {
                    throw StoreError(code: .unsupportedFormat,
                                     message: "Persist record \"\(key)\" has format version \(version); this build reads \(versions.upperBound)")
                }
                let found: UInt8 = try reader.read()
                guard found == kind.rawValue else { throw corrupted("expected kind \(kind), found byte \(found)", key: key) }
                let value = try body(&reader, version)
                guard reader.isAtEnd else { throw corrupted("\(reader.remaining) trailing bytes", key: key) }
                return value
            } catch is ByteReader.OutOfBounds {
                throw corrupted("truncated", key: key)
            }
        }
    }
}

extension ByteWriter {
    mutating func append(string: String) { appendLengthPrefixed(string.utf8) }
}

extension ByteReader {
    mutating func readString() throws -> String {
        let bytes = try readLengthPrefixed(limit: RecordFormat.maximumStringLength)
        guard let string = String(validating: bytes, as: UTF8.self) else { throw OutOfBounds() }
        return string
    }
}

/// Where a persister's history stands. Steps are kept at positions `first...last`; those up to
/// `cursor` are undoable (applied), those after it redoable.
struct Head: Hashable, Sendable {
    /// Writes, undos and redos committed so far: orders change notifications and new relations.
    var changeCount: UInt64 = 0
    /// The sequence the next write's step gets; sequences are never reused.
    var nextSequence: UInt64 = 1
    var first: UInt64 = 1
    var cursor: UInt64 = 0
    var last: UInt64 = 0

    init() {}

    init(_ record: Record?, key: String) throws {
        guard let record else { return }
        self = try RecordFormat.decode(record.value, as: .head, key: key) { reader in
            var head = Head()
            head.changeCount = try reader.read()
            head.nextSequence = try reader.read()
            head.first = try reader.read()
            head.cursor = try reader.read()
            head.last = try reader.read()
            return head
        }
        guard first >= 1, cursor <= last, first <= cursor + 1 else {
            throw RecordFormat.corrupted("history positions first \(first), cursor \(cursor), last \(last)", key: key)
        }
    }

    var record: Record {
        var writer = RecordFormat.writer(.head, capacity: 48)
        for field in [changeCount, nextSequence, first, cursor, last] { writer.append(field) }
        return Record(value: Data(writer.bytes))
    }

    var canUndo: Bool { cursor >= first }
    var canRedo: Bool { cursor < last }
    /// How many steps are undoable.
    var undoableCount: Int { Int(cursor + 1 - first) }
}

/// An entity: its stored name and its body's digest.
struct EntityRecord: Hashable, Sendable {
    var entityName: String
    var body: Digest

    init(entityName: String, body: Digest) {
        self.entityName = entityName
        self.body = body
    }

    init(_ record: Record, key: String) throws {
        entityName = try RecordFormat.decode(record.value, as: .entity, key: key) { try $0.readString() }
        guard let body = record.onlyReference else {
            throw RecordFormat.corrupted("an entity has \(record.references.count) references", key: key)
        }
        self.body = body
    }

    /// ``init(_:key:)`` of a record the caller expects to be named `name` (a save of that type):
    /// such a record is recognized by its bytes, without making the name a string and validating
    /// it, which was a share of every save (Docs/benchmarks/analysis.md §53).
    init(_ record: Record, key: String, expecting name: String) throws {
        guard let body = record.onlyReference, Self.isValue(record.value, of: name) else {
            try self.init(record, key: key)
            return
        }
        self.init(entityName: name, body: body)
    }

    /// Whether `value` is exactly the value ``record`` writes for `name`.
    private static func isValue(_ value: Data, of name: String) -> Bool {
        var name = name
        return name.withUTF8 { utf8 in
            value.withUnsafeBytes { raw in
                raw.count == nameOffset + utf8.count && raw[0] == RecordFormat.version && raw[1] == RecordFormat.Kind.entity.rawValue
                    && raw.loadUnaligned(fromByteOffset: 2, as: UInt32.self).littleEndian == UInt32(utf8.count)
                    && UnsafeRawBufferPointer(rebasing: raw[nameOffset...]).elementsEqual(utf8)
            }
        }
    }

    /// Where the name's bytes start in the value: after the version, the kind and the length.
    private static let nameOffset = 6

    var record: Record {
        var writer = RecordFormat.writer(.entity, capacity: 8 + entityName.utf8.count)
        writer.append(string: entityName)
        return Record(value: Data(writer.bytes), onlyReference: body)
    }

    /// ``record`` when it replaces `stored`, an entity record of the same name (read by
    /// ``init(_:key:)``, which takes only these exact bytes): the value is the name alone, so the
    /// stored one is shared, not encoded and allocated again at every save.
    func record(replacing stored: Record) -> Record {
        Record(value: stored.value, onlyReference: body)
    }
}

/// A relation: its place in relate order and whether deleting the source deletes the target.
struct RelationRecord: Hashable, Sendable {
    var cascadeDelete: Bool
    /// The change count of the write that related it, then its index in that write.
    var order: UInt64
    var index: UInt32

    private static let cascadeFlag: UInt8 = 1 << 0

    init(cascadeDelete: Bool, order: UInt64, index: UInt32) {
        self.cascadeDelete = cascadeDelete
        self.order = order
        self.index = index
    }

    init(_ record: Record, key: String) throws {
        self = try RecordFormat.decode(record.value, as: .relation, key: key) { reader in
            let flags: UInt8 = try reader.read()
            return RelationRecord(cascadeDelete: flags & Self.cascadeFlag != 0, order: try reader.read(), index: try reader.read())
        }
    }

    var record: Record {
        var writer = RecordFormat.writer(.relation, capacity: 16)
        writer.append(cascadeDelete ? Self.cascadeFlag : 0)
        writer.append(order)
        writer.append(index)
        return Record(value: Data(writer.bytes))
    }

    var sortKey: (UInt64, UInt32) { (order, index) }
}

/// One undo step as stored: what the history lists, and its diff: inline when small (format 2),
/// else a blob of its own (format 1, and every step written before format 2 existed).
struct StepRecord: Hashable, Sendable {
    /// Where a step's diff is.
    enum DiffLocation: Hashable, Sendable {
        case blob(Digest)
        case inline(Data)
    }

    /// The format of a step whose diff is inline.
    static let inlineVersion: UInt8 = 2

    var step: UndoStep
    var diff: DiffLocation
    /// Every digest the diff's records reference, so the step keeps them from collection.
    var bodies: [Digest]

    init(step: UndoStep, diff: DiffLocation, bodies: [Digest]) {
        self.step = step
        self.diff = diff
        self.bodies = bodies
    }

    init(_ record: Record, key: String) throws {
        let (step, inline) = try RecordFormat.decode(record.value, as: .step, key: key, versions: RecordFormat.version ... Self.inlineVersion) { reader, version in
            let sequence: UInt64 = try reader.read()
            let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.read()))
            let hasActionName: UInt8 = try reader.read()
            let step = UndoStep(sequence: sequence, actionName: hasActionName != 0 ? try reader.readString() : nil, date: date)
            let inline = version == Self.inlineVersion ? Data(try reader.readLengthPrefixed(limit: reader.remaining)) : nil
            return (step, inline)
        }
        self.step = step
        if let inline {
            diff = .inline(inline)
            bodies = record.references
        } else {
            guard let digest = record.references.first else { throw RecordFormat.corrupted("a step has no diff", key: key) }
            diff = .blob(digest)
            bodies = Array(record.references.dropFirst())
        }
    }

    var record: Record {
        let inline: Data? = if case .inline(let bytes) = diff { bytes } else { nil }
        var writer = RecordFormat.writer(.step, capacity: 40 + (step.actionName?.utf8.count ?? 0) + (inline?.count ?? 0),
                                         version: inline == nil ? RecordFormat.version : Self.inlineVersion)
        writer.append(step.sequence)
        writer.append(step.date.timeIntervalSinceReferenceDate.bitPattern)
        writer.append(UInt8(step.actionName == nil ? 0 : 1))
        if let actionName = step.actionName { writer.append(string: actionName) }
        switch diff {
        case .inline(let bytes):
            writer.appendLengthPrefixed(bytes)
            return Record(value: Data(writer.bytes), references: bodies)
        case .blob(let digest):
            return Record(value: Data(writer.bytes), references: [digest] + bodies)
        }
    }
}

extension StepRecord {
    /// The step's diff: decoded from the record, or read from its blob.
    func diff(in store: Store, key: String) throws -> Diff {
        switch diff {
        case .inline(let bytes): try Diff(bytes, key: key)
        case .blob(let digest): try Diff(store.get(digest), key: key)
        }
    }
}

/// The changes of one step: each key's record before and after it, in key order.
struct Diff: Hashable, Sendable {
    struct Change: Hashable, Sendable {
        var key: String
        var before: Record?
        var after: Record?
    }
    var changes: [Change]

    /// The largest diff kept inline in its step record (format 2); a larger one is a blob, so that
    /// a large write's record stays small in the log and the index.
    static let inlineLimit = 4096

    init(changes: [Change]) {
        self.changes = changes
    }

    init(_ blob: Data, key: String) throws {
        changes = try RecordFormat.decode(blob, as: .diff, key: key) { reader in
            let count: UInt32 = try reader.read()
            guard Int(count) <= reader.remaining else { throw ByteReader.OutOfBounds() }
            return try (0 ..< count).map { _ in
                Change(key: try reader.readString(), before: try Self.readImage(&reader), after: try Self.readImage(&reader))
            }
        }
    }

    var blob: Data {
        var writer = RecordFormat.writer(.diff, capacity: 64 + 160 * changes.count)
        writer.append(UInt32(changes.count))
        for change in changes {
            writer.append(string: change.key)
            Self.write(change.before, to: &writer)
            Self.write(change.after, to: &writer)
        }
        return Data(writer.bytes)
    }

    /// Every digest the records reference, once each, ascending.
    var digests: [Digest] {
        // Sorted, then adjacent repeats dropped: a write's diff names a few, which a set would hash.
        var all: [Digest] = []
        for change in changes {
            Self.append(change.before, to: &all)
            Self.append(change.after, to: &all)
        }
        all.sort()
        return all.indices.compactMap { $0 > 0 && all[$0] == all[$0 - 1] ? nil : all[$0] }
    }

    /// `record`'s references, appended to `digests`. A record with one (an entity's) is read
    /// without the array ``Record/references`` makes: an allocation per record image of a step.
    private static func append(_ record: Record?, to digests: inout [Digest]) {
        guard let record else { return }
        if let only = record.onlyReference { digests.append(only) } else { digests += record.references }
    }

    private static func write(_ record: Record?, to writer: inout ByteWriter) {
        guard let record else { return writer.append(UInt8(0)) }
        writer.append(UInt8(1))
        writer.appendLengthPrefixed(record.value)
        if let only = record.onlyReference {
            writer.append(UInt32(1))
            writer.append(only)
            return
        }
        let references = record.references
        writer.append(UInt32(references.count))
        for digest in references { writer.append(digest) }
    }

    private static func readImage(_ reader: inout ByteReader) throws -> Record? {
        let present: UInt8 = try reader.read()
        guard present != 0 else { return nil }
        let value = Data(try reader.readLengthPrefixed(limit: reader.remaining))
        let count: UInt32 = try reader.read()
        guard Int(count) <= reader.remaining / RecordFormat.digestLength else { throw ByteReader.OutOfBounds() }
        return Record(value: value, references: try (0 ..< count).map { _ in try reader.readDigest() })
    }
}
