import ContentStore
import Foundation

// The records Sync keeps in a Store, server side and client side. See Docs/sync.md ("Record layout").
//
// Every key starts with `sync/`, so a store can be shared with other facades. An object's place is
// written `<n>:<container>/<id>` where n is the container's UTF-8 byte count in decimal: containers
// and ids are arbitrary strings, and the count makes the split unambiguous while keeping a
// container's objects under one prefix, sorted by id.
//
// Values are version 1: `[version u8 = 1][kind u8]`, then the kind's fields. Integers are
// little-endian fixed width; strings are a u32 byte count and UTF-8 bytes; dates are the IEEE-754
// bits of `timeIntervalSince1970` as a u64. Digests are never in a value: they are the record's
// references, in an order the value defines, so the store's refcounts keep every blob a version
// (live, pending or in conflict) needs, and nothing else.
//
// Server (`sync/server/`):
//   meta                       kind M: sequence u64 (the last revision given), floor u64 (the highest
//                              revision of a tombstone dropped: a client behind it resyncs fully)
//   object/<place>             kind O: the current version (object fields, below)
//   sequence/<20-digit rev>    kind Q: place string. One entry per object, at its current revision:
//                              a pull since N reads the entries after N in order.
//   client/<client id>         kind C: last seen (date), pulled u64 (the client holds every change
//                              up to it), applied u64 (its highest mutation applied). Never removed,
//                              not even for a client forgotten after `clientRetention`: `applied` is
//                              what makes a retry from a returning client exactly-once.
//   progress/<client id>/<container>
//                              kind K: pulled u64 for the client's single-container syncs (it holds
//                              every change of that container up to it)
//   outcome/<client id>/<20-digit mutation>
//                              kind R: status u16 (200 applied, 409 overruled, 4xx rejected),
//                              revision u64, message string. Kept until the client acknowledges the
//                              mutation, so a retried push gets the first answer (exactly once);
//                              forgetting a client does not remove them.
// Client (`sync/client/<client id>/`):
//   state                      kind S: next mutation u64, acknowledged u64 (the highest mutation whose
//                              answer arrived), cursor u64 (every server change up to it is here)
//   cursor/<container>         kind K: cursor u64 for one container's own syncs
//   object/<place>             kind O: the local version (object fields)
//   pending/<place>            kind P: mutation u64, base revision u64 (0 = none): the local version
//                              is not on the server yet
//   conflict/<place>           kind X: reason u8 (0 overruled, 1 rejected), status u16, message
//                              string, the local version's object fields, has server u8, the
//                              server version's object fields; references: the local version's,
//                              then the server version's
//
// Object fields: revision u64 (0 = never synced; the server's revisions start at 1), flags u8 (bit 0:
// tombstone), author string (server: the client whose push wrote it; client: empty), attachment count
// u32, attachment names (strings, ascending by UTF-8 bytes). References: the body, then one digest per
// attachment in name order; none for a tombstone.

enum Keys {
    static let root = "sync/"
    static let serverMeta = "sync/server/meta"
    static let serverObjects = "sync/server/object/"
    static let serverSequence = "sync/server/sequence/"
    static let serverClients = "sync/server/client/"
    static let serverOutcomes = "sync/server/outcome/"
    static let serverProgress = "sync/server/progress/"

    /// `<n>:<container>/<id>`, or the prefix of a container's places when `id` is empty.
    static func place(container: String, id: String) -> String {
        "\(container.utf8.count):\(container)/\(id)"
    }

    /// The container and id of a place; nil when `place` is not one.
    static func parse(place: String) -> (container: String, id: String)? {
        let utf8 = Array(place.utf8)
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")),
              let count = Int(String(decoding: utf8[..<colon], as: UTF8.self)), count >= 0
        else { return nil }
        let start = colon + 1, slash = start + count
        guard slash < utf8.count, utf8[slash] == UInt8(ascii: "/") else { return nil }
        return (String(decoding: utf8[start ..< slash], as: UTF8.self), String(decoding: utf8[(slash + 1)...], as: UTF8.self))
    }

    static func sequenceDigits(_ revision: UInt64) -> String {
        let digits = String(revision)
        return String(repeating: "0", count: sequenceWidth - digits.count) + digits
    }

    /// UInt64.max has 20 decimal digits.
    static let sequenceWidth = 20

    static func serverSequence(_ revision: UInt64) -> String { serverSequence + sequenceDigits(revision) }

    /// Prefixes of `sync/server/sequence/` that together hold exactly the revisions above `revision`,
    /// in ascending order: a pull reads only what is new, however long the log.
    static func serverSequencePrefixes(after revision: UInt64) -> [String] {
        let digits = Array(sequenceDigits(revision))
        var prefixes: [String] = []
        for position in stride(from: sequenceWidth - 1, through: 0, by: -1) {
            let head = String(digits[..<position])
            let digit = digits[position].wholeNumberValue!
            for next in (digit + 1) ..< 10 { prefixes.append(serverSequence + head + String(next)) }
        }
        return prefixes
    }

    static func serverClient(_ client: String) -> String { serverClients + client }
    static func serverOutcomes(_ client: String) -> String { serverOutcomes + client + "/" }
    static func serverProgress(_ client: String) -> String { serverProgress + client + "/" }
    static func serverOutcome(_ client: String, mutation: UInt64) -> String {
        serverOutcomes(client) + sequenceDigits(mutation)
    }

    /// The keys of one client's local state.
    struct Client {
        let root: String
        init(_ clientID: String) { root = "sync/client/\(clientID)/" }
        var state: String { root + "state" }
        var objects: String { root + "object/" }
        var pending: String { root + "pending/" }
        var conflicts: String { root + "conflict/" }
        func cursor(_ container: String) -> String { root + "cursor/" + container }
    }
}

enum RecordFormat {
    static let version: UInt8 = 1
    enum Kind: UInt8 {
        case meta = 0x4D        // M
        case object = 0x4F      // O
        case sequence = 0x51    // Q
        case client = 0x43      // C
        case outcome = 0x52     // R
        case state = 0x53       // S
        case cursor = 0x4B      // K
        case pending = 0x50     // P
        case conflict = 0x58    // X
    }
    static let tombstoneFlag: UInt8 = 1 << 0
    /// Strings in Sync records are names and messages; anything longer is damage.
    static let maximumStringLength = 1 << 20

    static func corrupted(_ key: String, _ what: String) -> StoreError {
        StoreError(code: .corrupted, message: "Sync record \(key) is malformed: \(what)")
    }

    static func writer(_ kind: Kind, capacity: Int = 32) -> ByteWriter {
        var writer = ByteWriter(capacity: capacity)
        writer.append(version)
        writer.append(kind.rawValue)
        return writer
    }

    /// Decodes `record.value` after checking its header; any short read is `corrupted`, naming `key`.
    static func decode<T>(_ record: Record, key: String, _ kind: Kind, _ body: (inout ByteReader) throws -> T) throws -> T {
        do {
            return try record.value.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                guard try reader.read(UInt8.self) == version else { throw corrupted(key, "unknown version") }
                guard try reader.read(UInt8.self) == kind.rawValue else { throw corrupted(key, "not a \(kind) record") }
                let value = try body(&reader)
                guard reader.isAtEnd else { throw corrupted(key, "\(reader.remaining) bytes after the fields") }
                return value
            }
        } catch is ByteReader.OutOfBounds {
            throw corrupted(key, "truncated")
        }
    }
}

extension ByteWriter {
    mutating func append(string: String) { appendLengthPrefixed(Array(string.utf8)) }
    mutating func append(date: Date) { append(date.timeIntervalSince1970.bitPattern) }
}

extension ByteReader {
    mutating func readString() throws -> String {
        String(decoding: try readLengthPrefixed(limit: RecordFormat.maximumStringLength), as: UTF8.self)
    }
    mutating func readDate() throws -> Date { Date(timeIntervalSince1970: Double(bitPattern: try read(UInt64.self))) }
}

/// One version of an object as stored: its blobs by digest.
struct StoredObject: Hashable, Sendable {
    var container: String
    var id: String
    var revision: UInt64?
    var isDeleted: Bool
    /// Server side: the client whose push wrote this version ("" for the server's own writes).
    var author: String
    var body: Digest?
    var attachments: [String: Digest]

    static func tombstone(container: String, id: String, revision: UInt64?, author: String) -> StoredObject {
        StoredObject(container: container, id: id, revision: revision, isDeleted: true, author: author, body: nil, attachments: [:])
    }

    var place: String { Keys.place(container: container, id: id) }

    /// Attachment names in ascending order of their UTF-8 bytes: the stored order.
    var sortedNames: [String] { attachments.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } }

    /// The blobs this version needs: the body, then the attachments in name order.
    var references: [Digest] {
        guard !isDeleted, let body else { return [] }
        return [body] + sortedNames.map { attachments[$0]! }
    }

    func write(to writer: inout ByteWriter) {
        writer.append(revision ?? 0)
        writer.append(isDeleted ? RecordFormat.tombstoneFlag : 0)
        writer.append(string: author)
        let names = isDeleted ? [] : sortedNames
        writer.append(UInt32(names.count))
        for name in names { writer.append(string: name) }
    }

    /// Reads the fields and takes this version's digests from the front of `references`.
    static func read(from reader: inout ByteReader, container: String, id: String, references: inout ArraySlice<Digest>,
                     key: String) throws -> StoredObject {
        let revision = try reader.read(UInt64.self)
        let flags = try reader.read(UInt8.self)
        let author = try reader.readString()
        let count = Int(try reader.read(UInt32.self))
        let isDeleted = flags & RecordFormat.tombstoneFlag != 0
        guard count <= reader.remaining, references.count >= (isDeleted ? 0 : 1 + count) else {
            throw RecordFormat.corrupted(key, "\(count) attachments but \(references.count) references")
        }
        var object = StoredObject.tombstone(container: container, id: id, revision: revision == 0 ? nil : revision, author: author)
        guard !isDeleted else { return object }
        object.isDeleted = false
        object.body = references.removeFirst()
        for _ in 0 ..< count { object.attachments[try reader.readString()] = references.removeFirst() }
        return object
    }

    /// The record of this version alone (kind O).
    var record: Record {
        var writer = RecordFormat.writer(.object, capacity: 48 + 16 * attachments.count)
        write(to: &writer)
        return Record(value: Data(writer.bytes), references: references)
    }

    init(container: String, id: String, revision: UInt64?, isDeleted: Bool, author: String, body: Digest?, attachments: [String: Digest]) {
        self.container = container
        self.id = id
        self.revision = revision
        self.isDeleted = isDeleted
        self.author = author
        self.body = body
        self.attachments = attachments
    }

    init(_ record: Record, container: String, id: String, key: String) throws {
        var references = record.references[...]
        self = try RecordFormat.decode(record, key: key, .object) { reader in
            try StoredObject.read(from: &reader, container: container, id: id, references: &references, key: key)
        }
        guard references.isEmpty else { throw RecordFormat.corrupted(key, "\(references.count) references too many") }
    }

    /// Every digest this version names, body first.
    var digests: [Digest] { references }
}

/// `sync/server/meta`.
struct ServerMeta: Hashable, Sendable {
    var sequence: UInt64 = 0
    var floor: UInt64 = 0

    var record: Record {
        var writer = RecordFormat.writer(.meta)
        writer.append(sequence)
        writer.append(floor)
        return Record(value: Data(writer.bytes))
    }

    init() {}

    init(_ record: Record?) throws {
        guard let record else { return }
        (sequence, floor) = try RecordFormat.decode(record, key: Keys.serverMeta, .meta) { reader in
            (try reader.read(UInt64.self), try reader.read(UInt64.self))
        }
    }
}

/// `sync/server/client/<id>`.
struct ServerClient: Hashable, Sendable {
    var lastSeen: Date
    var pulled: UInt64 = 0
    var applied: UInt64 = 0

    var record: Record {
        var writer = RecordFormat.writer(.client)
        writer.append(date: lastSeen)
        writer.append(pulled)
        writer.append(applied)
        return Record(value: Data(writer.bytes))
    }

    init(lastSeen: Date) { self.lastSeen = lastSeen }

    init(_ record: Record, key: String) throws {
        (lastSeen, pulled, applied) = try RecordFormat.decode(record, key: key, .client) { reader in
            (try reader.readDate(), try reader.read(UInt64.self), try reader.read(UInt64.self))
        }
    }
}

/// `sync/server/outcome/<client>/<mutation>`: the answer a push got, for its retries.
struct ServerOutcome: Hashable, Sendable {
    var status: Int
    var revision: UInt64
    var message: String

    var record: Record {
        var writer = RecordFormat.writer(.outcome)
        writer.append(UInt16(clamping: status))
        writer.append(revision)
        writer.append(string: message)
        return Record(value: Data(writer.bytes))
    }

    init(status: Int, revision: UInt64, message: String) {
        self.status = status
        self.revision = revision
        self.message = message
    }

    init(_ record: Record, key: String) throws {
        (status, revision, message) = try RecordFormat.decode(record, key: key, .outcome) { reader in
            (Int(try reader.read(UInt16.self)), try reader.read(UInt64.self), try reader.readString())
        }
    }
}

/// `sync/server/sequence/<rev>`: which object holds a revision.
enum SequenceEntry {
    static func record(place: String) -> Record {
        var writer = RecordFormat.writer(.sequence)
        writer.append(string: place)
        return Record(value: Data(writer.bytes))
    }

    static func place(_ record: Record, key: String) throws -> String {
        try RecordFormat.decode(record, key: key, .sequence) { try $0.readString() }
    }
}

/// `sync/client/<id>/state`.
struct ClientState: Hashable, Sendable {
    var nextMutation: UInt64 = 1
    var acknowledged: UInt64 = 0
    var cursor: UInt64 = 0

    var record: Record {
        var writer = RecordFormat.writer(.state)
        writer.append(nextMutation)
        writer.append(acknowledged)
        writer.append(cursor)
        return Record(value: Data(writer.bytes))
    }

    init() {}

    init(_ record: Record?, key: String) throws {
        guard let record else { return }
        (nextMutation, acknowledged, cursor) = try RecordFormat.decode(record, key: key, .state) { reader in
            (try reader.read(UInt64.self), try reader.read(UInt64.self), try reader.read(UInt64.self))
        }
    }
}

/// `sync/client/<id>/cursor/<container>`, and the server's `sync/server/progress/<id>/<container>`.
enum ContainerCursor {
    static func record(_ cursor: UInt64) -> Record {
        var writer = RecordFormat.writer(.cursor)
        writer.append(cursor)
        return Record(value: Data(writer.bytes))
    }

    static func cursor(_ record: Record?, key: String) throws -> UInt64 {
        guard let record else { return 0 }
        return try RecordFormat.decode(record, key: key, .cursor) { try $0.read(UInt64.self) }
    }
}

/// `sync/client/<id>/pending/<place>`: a local change not yet on the server.
struct PendingChange: Hashable, Sendable {
    /// This change's mutation ID; a newer local edit of the object gets a new one.
    var mutation: UInt64
    /// The server revision the local edit started from (0: none).
    var base: UInt64

    var record: Record {
        var writer = RecordFormat.writer(.pending)
        writer.append(mutation)
        writer.append(base)
        return Record(value: Data(writer.bytes))
    }

    init(mutation: UInt64, base: UInt64) {
        self.mutation = mutation
        self.base = base
    }

    init(_ record: Record, key: String) throws {
        (mutation, base) = try RecordFormat.decode(record, key: key, .pending) { reader in
            (try reader.read(UInt64.self), try reader.read(UInt64.self))
        }
    }
}

/// `sync/client/<id>/conflict/<place>`: a local version the server did not take, with its blobs.
struct StoredConflict: Hashable, Sendable {
    var local: StoredObject
    var server: StoredObject?
    var reason: SyncConflict.Reason

    var record: Record {
        var writer = RecordFormat.writer(.conflict, capacity: 96)
        switch reason {
        case .overruled:
            writer.append(UInt8(0)); writer.append(UInt16(0)); writer.append(string: "")
        case let .rejected(status, message):
            writer.append(UInt8(1)); writer.append(UInt16(clamping: status)); writer.append(string: message)
        }
        local.write(to: &writer)
        writer.append(UInt8(server == nil ? 0 : 1))
        server?.write(to: &writer)
        return Record(value: Data(writer.bytes), references: local.references + (server?.references ?? []))
    }

    init(local: StoredObject, server: StoredObject?, reason: SyncConflict.Reason) {
        self.local = local
        self.server = server
        self.reason = reason
    }

    init(_ record: Record, container: String, id: String, key: String) throws {
        var references = record.references[...]
        self = try RecordFormat.decode(record, key: key, .conflict) { reader in
            let kind = try reader.read(UInt8.self)
            let status = Int(try reader.read(UInt16.self))
            let message = try reader.readString()
            let local = try StoredObject.read(from: &reader, container: container, id: id, references: &references, key: key)
            let server = try reader.read(UInt8.self) == 0
                ? nil : try StoredObject.read(from: &reader, container: container, id: id, references: &references, key: key)
            return StoredConflict(local: local, server: server, reason: kind == 0 ? .overruled : .rejected(status: status, message: message))
        }
    }
}

/// Checks the names the store's keys are built from: they must be non-empty UTF-8 without NUL, and
/// short enough that every key built from them stays well inside the store's key limit.
enum Names {
    static let maximumLength = 1024

    static func check(_ value: String, _ what: String) throws {
        guard !value.isEmpty, !value.utf8.contains(0), value.utf8.count <= maximumLength else {
            throw SyncError(code: .invalidArgument,
                            message: "\(what) \"\(value.prefix(64))\" must be 1 to \(maximumLength) UTF-8 bytes without NUL")
        }
    }

    static func check(container: String, id: String) throws {
        try check(container, "container")
        try check(id, "id")
    }

    /// Client IDs appear inside keys between slashes.
    static func check(clientID: String) throws {
        try check(clientID, "client ID")
        guard !clientID.contains("/"), clientID.utf8.count <= 256 else {
            throw SyncError(code: .invalidArgument, message: "client ID \"\(clientID.prefix(64))\" must have no \"/\" and at most 256 bytes")
        }
    }

    static func check(_ object: SyncObject) throws {
        try check(container: object.container, id: object.id)
        for name in object.attachments.keys { try check(name, "attachment name") }
    }
}
