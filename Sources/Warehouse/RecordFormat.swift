import ContentStore
import Foundation

/// The keys Warehouse uses in the store. Every Warehouse key starts with `warehouse/`, so the store
/// can be shared with other facades. See Docs/warehouse.md.
enum Keys {
    static let root = "warehouse/"
    static let projectPrefix = "warehouse/project/"
    static let assetsPrefix = "warehouse/assets/"
    static let stepPrefix = "warehouse/step/"

    /// `warehouse/project/<PROJECT-UUID>`: the project record.
    static func project(_ id: UUID) -> String { projectPrefix + id.uuidString }
    /// `warehouse/assets/<PROJECT-UUID>`: the project's assets; absent when it has none.
    static func assets(_ id: UUID) -> String { assetsPrefix + id.uuidString }
    /// `warehouse/step/<PROJECT-UUID>/`: the prefix of the project's step records.
    static func steps(_ id: UUID) -> String { stepPrefix + id.uuidString + "/" }
    /// `warehouse/step/<PROJECT-UUID>/<STEP-UUID>`: one step record.
    static func step(_ stepID: UUID, of projectID: UUID) -> String { steps(projectID) + stepID.uuidString }

    /// The project ID in a key under ``projectPrefix``.
    static func projectID(fromProjectKey key: String) -> UUID? {
        guard key.hasPrefix(projectPrefix) else { return nil }
        return UUID(uuidString: String(key.dropFirst(projectPrefix.count)))
    }
}

/// Version 1 of the record values. Every value starts with `[format version: u8 = 1][kind: u8]`;
/// integers are unsigned LEB128 varints, dates are the IEEE-754 bits of
/// `timeIntervalSinceReferenceDate` as a little-endian UInt64, strings are a varint byte count and
/// UTF-8 bytes, UUIDs are their 16 bytes in RFC 4122 order. Digests are not repeated in the value:
/// they are the record's references, in an order the value defines.
enum RecordFormat {
    static let version: UInt8 = 1
    enum Kind: UInt8 {
        case project = 0x50   // "P"
        case step = 0x53      // "S"
        case assets = 0x41    // "A"
    }
    /// Flag bit: the record's first reference is its user data blob.
    static let hasUserData: UInt8 = 1 << 0

    static func corrupted(_ what: String) -> StoreError {
        StoreError(code: .corrupted, message: "Warehouse record is malformed: \(what)")
    }
}

/// A project record: `warehouse/project/<id>`.
///
/// Value: header (kind `P`), creation date, modification date, step cursor (varint), flags (u8),
/// bundle ID (string), step count (varint), step IDs (16 bytes each).
/// References: `[user data]` when the flag says so, else none.
struct ProjectRecord: Hashable, Sendable {
    var creationDate: Date
    var modificationDate: Date
    var stepCursor: Int
    var bundleID: String
    var userData: Digest?
    var stepIDs: [UUID]

    var record: Record {
        var writer = ByteWriter(capacity: 40 + bundleID.utf8.count + 16 * stepIDs.count)
        writeFields(to: &writer)
        writer.appendVarint(UInt64(stepIDs.count))
        writer.uuids(stepIDs)
        return Record(value: writer.data, references: references)
    }

    /// Decodes a project record; with `includingSteps: false` the step IDs are left empty and not read.
    init(_ record: Record, includingSteps: Bool = true) throws {
        self = try RecordFormat.decode(record, toEnd: includingSteps) { reader in
            var project = try ProjectRecord(fields: &reader, references: record.references)
            guard includingSteps else { return project }
            project.stepIDs = try reader.uuids(count: try reader.count(elementSize: 16))
            return project
        }
    }

    /// Reads every field up to the step list (and leaves `stepIDs` empty).
    fileprivate init(fields reader: inout ByteReader, references: [Digest]) throws {
        try reader.header(.project)
        creationDate = try reader.date()
        modificationDate = try reader.date()
        stepCursor = Int(clamping: try reader.readVarint())
        let flags = try reader.read(UInt8.self)
        bundleID = try reader.string()
        let hasUserData = flags & RecordFormat.hasUserData != 0
        guard references.count == (hasUserData ? 1 : 0) else {
            throw RecordFormat.corrupted("a project record has \(references.count) references")
        }
        userData = hasUserData ? references[0] : nil
        stepIDs = []
    }

    /// Writes every field up to the step list.
    fileprivate func writeFields(to writer: inout ByteWriter) {
        writer.header(.project)
        writer.date(creationDate)
        writer.date(modificationDate)
        writer.appendVarint(UInt64(stepCursor))
        writer.append(userData == nil ? 0 : RecordFormat.hasUserData)
        writer.string(bundleID)
    }

    fileprivate var references: [Digest] { userData.map { [$0] } ?? [] }

    init(creationDate: Date, modificationDate: Date, stepCursor: Int, bundleID: String, userData: Digest?, stepIDs: [UUID]) {
        self.creationDate = creationDate
        self.modificationDate = modificationDate
        self.stepCursor = stepCursor
        self.bundleID = bundleID
        self.userData = userData
        self.stepIDs = stepIDs
    }
}

/// A project record whose step list is kept as stored: for the changes that leave the list alone
/// (undo, redo, user data, dates), which then neither decode nor re-encode 16 bytes per step.
struct ProjectRecordKeepingSteps {
    /// Every field but the step IDs, which stay empty here.
    var fields: ProjectRecord
    /// How many step IDs the stored list holds.
    let stepCount: Int
    private let stepList: [UInt8]

    init(_ record: Record) throws {
        (fields, stepCount, stepList) = try RecordFormat.decode(record) { reader in
            let fields = try ProjectRecord(fields: &reader, references: record.references)
            let stepCount = try reader.count(elementSize: 16)
            return (fields, stepCount, Array(try reader.readBytes(16 * stepCount)))
        }
    }

    var record: Record {
        var writer = ByteWriter(capacity: 40 + fields.bundleID.utf8.count + stepList.count)
        fields.writeFields(to: &writer)
        writer.appendVarint(UInt64(stepCount))
        writer.append(contentsOf: stepList)
        return Record(value: writer.data, references: fields.references)
    }
}

/// Named assets: the value lists names, the references list their blobs in the same order. Used
/// by step records (after the optional user data reference) and by project asset records.
struct AssetTable: Hashable, Sendable {
    var digests: [String: Digest] = [:]

    /// Names in ascending order of their UTF-8 bytes: the stored order.
    var sortedNames: [String] {
        digests.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    func write(to writer: inout ByteWriter, references: inout [Digest]) {
        let names = sortedNames
        writer.appendVarint(UInt64(names.count))
        for name in names {
            writer.string(name)
            references.append(digests[name]!)
        }
    }

    static func read(from reader: inout ByteReader, references: ArraySlice<Digest>) throws -> AssetTable {
        let count = try reader.count(elementSize: 1)
        guard references.count == count else {
            throw RecordFormat.corrupted("\(count) asset names but \(references.count) asset references")
        }
        var table = AssetTable()
        table.digests.reserveCapacity(count)
        var reference = references.startIndex
        for _ in 0 ..< count {
            let name = try reader.string()
            // Validated again as read, not only as written: exports build paths from these names,
            // and a forged or damaged store must not make them write outside their directory.
            if let problem = AssetName.problem(with: name) {
                throw RecordFormat.corrupted("asset name \"\(AssetName.describe(name))\" \(problem)")
            }
            table.digests[name] = references[reference]
            reference += 1
        }
        return table
    }
}

/// A step record: `warehouse/step/<project id>/<step id>`.
///
/// Value: header (kind `S`), flags (u8), asset count (varint), asset names (strings, ascending).
/// References: `[user data]` when the flag says so, then one digest per asset name, in order.
struct StepRecord: Hashable, Sendable {
    var userData: Digest?
    var assets: AssetTable

    var record: Record {
        var writer = ByteWriter(capacity: 16 + 32 * assets.digests.count)
        var references: [Digest] = []
        references.reserveCapacity(assets.digests.count + 1)
        writer.header(.step)
        writer.append(userData == nil ? 0 : RecordFormat.hasUserData)
        if let userData { references.append(userData) }
        assets.write(to: &writer, references: &references)
        return Record(value: writer.data, references: references)
    }

    init(userData: Digest?, assets: AssetTable) {
        self.userData = userData
        self.assets = assets
    }

    init(_ record: Record) throws {
        self = try RecordFormat.decode(record) { reader in
            try reader.header(.step)
            let hasUserData = try reader.read(UInt8.self) & RecordFormat.hasUserData != 0
            guard !hasUserData || !record.references.isEmpty else { throw RecordFormat.corrupted("a step record lacks its user data reference") }
            return StepRecord(userData: hasUserData ? record.references[0] : nil,
                              assets: try AssetTable.read(from: &reader, references: record.references.dropFirst(hasUserData ? 1 : 0)))
        }
    }
}

/// A project's assets: `warehouse/assets/<project id>`, absent when there are none.
///
/// Value: header (kind `A`), asset count (varint), asset names (strings, ascending).
/// References: one digest per name, in order.
struct ProjectAssetsRecord: Hashable, Sendable {
    var assets: AssetTable

    var record: Record {
        var writer = ByteWriter(capacity: 8 + 32 * assets.digests.count)
        var references: [Digest] = []
        references.reserveCapacity(assets.digests.count)
        writer.header(.assets)
        assets.write(to: &writer, references: &references)
        return Record(value: writer.data, references: references)
    }

    init(assets: AssetTable) {
        self.assets = assets
    }

    init(_ record: Record) throws {
        assets = try RecordFormat.decode(record) { reader in
            try reader.header(.assets)
            return try AssetTable.read(from: &reader, references: record.references[...])
        }
    }
}

// MARK: - Bytes

// The record fields on the engine's byte coding (`ByteWriter`, `ByteReader`): integers are its
// LEB128 varints, dates and UUIDs fixed-width.

extension RecordFormat {
    /// Decodes `record`'s value with `body`, which must read all of it unless `toEnd` is false; a
    /// value too short for what it declares, or a varint past 64 bits, is `corrupted`.
    static func decode<T>(_ record: Record, toEnd: Bool = true, _ body: (inout ByteReader) throws -> T) throws -> T {
        try record.value.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                let value = try body(&reader)
                guard !toEnd || reader.isAtEnd else { throw corrupted("\(reader.remaining) trailing bytes") }
                return value
            } catch is ByteReader.OutOfBounds {
                throw corrupted("truncated")
            } catch is ByteReader.VarintOverflow {
                throw corrupted("a varint overflows")
            }
        }
    }
}

extension ByteWriter {
    var data: Data { Data(bytes) }

    mutating func header(_ kind: RecordFormat.Kind) {
        append(RecordFormat.version)
        append(kind.rawValue)
    }

    mutating func date(_ date: Date) { append(date.timeIntervalSinceReferenceDate.bitPattern) }

    mutating func string(_ string: String) { appendVarintPrefixed(string.utf8) }

    /// The IDs' 16 bytes each, back to back: a project's step list, written on every update.
    mutating func uuids(_ ids: [UUID]) {
        ids.withUnsafeBytes { append($0) }
    }
}

extension ByteReader {
    mutating func header(_ kind: RecordFormat.Kind) throws {
        let version: UInt8 = try read()
        guard version == RecordFormat.version else {
            throw StoreError(code: .unsupportedFormat, message: "Warehouse record format version \(version) is not supported (this build reads \(RecordFormat.version))")
        }
        let found: UInt8 = try read()
        guard found == kind.rawValue else {
            throw RecordFormat.corrupted("expected a record of kind \(kind), found kind byte \(found)")
        }
    }

    /// A count of elements that must fit in what is left of the value.
    mutating func count(elementSize: Int) throws -> Int {
        let count = try readVarint()
        guard count <= UInt64(remaining / elementSize) else { throw RecordFormat.corrupted("a count of \(count) exceeds the value") }
        return Int(count)
    }

    mutating func date() throws -> Date {
        Date(timeIntervalSinceReferenceDate: Double(bitPattern: try read(UInt64.self)))
    }

    mutating func string() throws -> String {
        guard let string = String(validating: try readBytes(try count(elementSize: 1)), as: UTF8.self) else {
            throw RecordFormat.corrupted("a string is not valid UTF-8")
        }
        return string
    }

    /// `count` UUIDs of 16 bytes each, read in one pass: a project's step list, read by every fetch
    /// and update.
    mutating func uuids(count: Int) throws -> [UUID] {
        let raw = try readBytes(16 * count)
        return (0 ..< count).map { UUID(uuid: raw.loadUnaligned(fromByteOffset: 16 * $0, as: uuid_t.self)) }
    }
}
