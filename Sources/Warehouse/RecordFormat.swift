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
        writer.varint(UInt64(stepIDs.count))
        writer.uuids(stepIDs)
        return Record(value: writer.data, references: references)
    }

    /// Decodes a project record; with `includingSteps: false` the step IDs are left empty and not read.
    init(_ record: Record, includingSteps: Bool = true) throws {
        var reader = ByteReader(record.value)
        try self.init(fields: &reader, references: record.references)
        guard includingSteps else { return }
        stepIDs = try reader.uuids(count: try reader.count(elementSize: 16))
        try reader.end()
    }

    /// Reads every field up to the step list (and leaves `stepIDs` empty).
    fileprivate init(fields reader: inout ByteReader, references: [Digest]) throws {
        try reader.header(.project)
        creationDate = try reader.date()
        modificationDate = try reader.date()
        stepCursor = Int(clamping: try reader.varint())
        let flags = try reader.byte()
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
        writer.varint(UInt64(stepCursor))
        writer.byte(userData == nil ? 0 : RecordFormat.hasUserData)
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
    private let stepList: ArraySlice<UInt8>

    init(_ record: Record) throws {
        var reader = ByteReader(record.value)
        fields = try ProjectRecord(fields: &reader, references: record.references)
        stepCount = try reader.count(elementSize: 16)
        stepList = try reader.raw(count: 16 * stepCount)
        try reader.end()
    }

    var record: Record {
        var writer = ByteWriter(capacity: 40 + fields.bundleID.utf8.count + stepList.count)
        fields.writeFields(to: &writer)
        writer.varint(UInt64(stepCount))
        writer.raw(stepList)
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
        writer.varint(UInt64(names.count))
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
        writer.byte(userData == nil ? 0 : RecordFormat.hasUserData)
        if let userData { references.append(userData) }
        assets.write(to: &writer, references: &references)
        return Record(value: writer.data, references: references)
    }

    init(userData: Digest?, assets: AssetTable) {
        self.userData = userData
        self.assets = assets
    }

    init(_ record: Record) throws {
        var reader = ByteReader(record.value)
        try reader.header(.step)
        let hasUserData = try reader.byte() & RecordFormat.hasUserData != 0
        guard !hasUserData || !record.references.isEmpty else { throw RecordFormat.corrupted("a step record lacks its user data reference") }
        userData = hasUserData ? record.references[0] : nil
        assets = try AssetTable.read(from: &reader, references: record.references.dropFirst(hasUserData ? 1 : 0))
        try reader.end()
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
        var reader = ByteReader(record.value)
        try reader.header(.assets)
        assets = try AssetTable.read(from: &reader, references: record.references[...])
        try reader.end()
    }
}

// MARK: - Bytes

struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    var data: Data { Data(bytes) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func raw(_ values: ArraySlice<UInt8>) { bytes.append(contentsOf: values) }

    mutating func header(_ kind: RecordFormat.Kind) {
        bytes.append(RecordFormat.version)
        bytes.append(kind.rawValue)
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func date(_ date: Date) {
        let bits = date.timeIntervalSinceReferenceDate.bitPattern
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    mutating func string(_ string: String) {
        varint(UInt64(string.utf8.count))
        bytes.append(contentsOf: string.utf8)
    }

    /// The IDs' 16 bytes each, back to back: a project's step list, written on every update.
    mutating func uuids(_ ids: [UUID]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: 16 * ids.count))
        bytes.withUnsafeMutableBytes { buffer in
            for (index, id) in ids.enumerated() {
                buffer.storeBytes(of: id.uuid, toByteOffset: start + 16 * index, as: uuid_t.self)
            }
        }
    }
}

struct ByteReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ data: Data) {
        bytes = [UInt8](data)
    }

    private var remaining: Int { bytes.count - position }

    mutating func byte() throws -> UInt8 {
        guard remaining >= 1 else { throw RecordFormat.corrupted("truncated") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func header(_ kind: RecordFormat.Kind) throws {
        let version = try byte()
        guard version == RecordFormat.version else {
            throw StoreError(code: .unsupportedFormat, message: "Warehouse record format version \(version) is not supported (this build reads \(RecordFormat.version))")
        }
        let found = try byte()
        guard found == kind.rawValue else {
            throw RecordFormat.corrupted("expected a record of kind \(kind), found kind byte \(found)")
        }
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            guard shift < 64, shift < 63 || next <= 1 else { throw RecordFormat.corrupted("a varint overflows") }
            value |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// The next `count` bytes as stored.
    mutating func raw(count: Int) throws -> ArraySlice<UInt8> {
        guard count <= remaining else { throw RecordFormat.corrupted("truncated") }
        defer { position += count }
        return bytes[position ..< position + count]
    }

    /// A count of elements that must fit in what is left of the value.
    mutating func count(elementSize: Int) throws -> Int {
        let count = try varint()
        guard count <= UInt64(remaining / elementSize) else { throw RecordFormat.corrupted("a count of \(count) exceeds the value") }
        return Int(count)
    }

    mutating func date() throws -> Date {
        guard remaining >= 8 else { throw RecordFormat.corrupted("truncated date") }
        var bits: UInt64 = 0
        for index in 0 ..< 8 { bits |= UInt64(bytes[position + index]) << UInt64(8 * index) }
        position += 8
        return Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
    }

    mutating func string() throws -> String {
        let length = try count(elementSize: 1)
        defer { position += length }
        guard let string = String(validating: bytes[position ..< position + length], as: UTF8.self) else {
            throw RecordFormat.corrupted("a string is not valid UTF-8")
        }
        return string
    }

    /// `count` UUIDs of 16 bytes each, read in one pass: a project's step list, read by every fetch
    /// and update.
    mutating func uuids(count: Int) throws -> [UUID] {
        guard count <= remaining / 16 else { throw RecordFormat.corrupted("truncated UUID") }
        let start = position
        position += 16 * count
        return bytes.withUnsafeBytes { buffer in
            (0 ..< count).map { UUID(uuid: buffer.loadUnaligned(fromByteOffset: start + 16 * $0, as: uuid_t.self)) }
        }
    }

    func end() throws {
        guard remaining == 0 else { throw RecordFormat.corrupted("\(remaining) trailing bytes") }
    }
}
