import ContentStore
import Foundation

/// The keys one state uses. Every StateLens key starts with `statelens/`, so a store can be shared
/// with other facades. See Docs/statelens.md.
///
/// - `statelens/h/<name>`: the state's current version (``VersionRecord``).
/// - `statelens/v/<n>:<name>/<sequence>`: a kept older version, `<n>` the name's UTF-8 byte count
///   (so no name's prefix is another name's) and `<sequence>` 16 lowercase hex digits (so keys
///   sort by sequence).
struct StateKeys: Hashable, Sendable {
    static let maximumNameLength = 256

    let head: String
    let versionPrefix: String

    init(name: String) throws {
        guard !name.isEmpty else { throw LensError.invalidName("a state name must not be empty") }
        guard name.utf8.count <= StateKeys.maximumNameLength else {
            throw LensError.invalidName("a state name is at most \(StateKeys.maximumNameLength) UTF-8 bytes; \"\(name.prefix(40))…\" is \(name.utf8.count)")
        }
        guard !name.utf8.contains(0) else { throw LensError.invalidName("a state name must not contain NUL: \"\(name)\"") }
        head = "statelens/h/" + name
        versionPrefix = "statelens/v/\(name.utf8.count):\(name)/"
    }

    func version(_ sequence: UInt64) -> String {
        let hex = String(sequence, radix: 16)
        return versionPrefix + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// One version of a state, as the value of its record (format 1):
///
/// ```
/// [format: u8 = 1][flags: u8, bit 0 = holds a value][sequence: u64 LE][date: f64 bits LE, seconds since 2001]
/// [template: the rest, when bit 0 is set: the root's canonical JSON with part references (PartFormat)]
/// ```
/// References: every part the template needs (each once, ascending), so the store counts them and
/// collection keeps them exactly as long as some version record needs them. A version without a
/// value (after `reset`) has no template and no references: the state reads as its default.
struct VersionRecord: Hashable, Sendable {
    static let format: UInt8 = 1
    static let holdsValue: UInt8 = 1 << 0
    static let headerSize = 18

    var sequence: UInt64
    var date: Date
    /// nil after `reset`.
    var template: [UInt8]?
    var parts: [Digest]

    init(sequence: UInt64, date: Date, template: [UInt8]?, parts: [Digest]) {
        self.sequence = sequence
        self.date = date
        self.template = template
        self.parts = VersionRecord.normalized(parts)
    }

    /// `parts` sorted, equal neighbours dropped: cheaper than a set for the ~100 parts of a large
    /// state, and ``StateNode/newParts(excluding:reusedAreKnown:into:)`` searches the result. A
    /// root whose parts are one large container's arrives sorted (``StateNode/parts``) and, with
    /// no part twice, is returned as it is, its buffer shared rather than copied.
    static func normalized(_ parts: [Digest]) -> [Digest] {
        var sorted = parts.isAscending ? parts : parts.sorted()
        if sorted.hasAdjacentDuplicates { sorted.removeAdjacentDuplicates() }
        return sorted
    }

    init(_ record: Record, key: String) throws {
        func damaged(_ what: String) -> StoreError {
            StoreError(code: .corrupted, message: "StateLens record \"\(key)\" is damaged: \(what)")
        }
        guard record.value.count >= VersionRecord.headerSize else {
            throw damaged("its value is \(record.value.count) bytes, shorter than the header")
        }
        // The header's size is checked: these reads stay inside the value.
        let (format, flags, sequence, dateBits, rest) = try record.value.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            return (try reader.read(UInt8.self), try reader.read(UInt8.self), try reader.read(UInt64.self), try reader.read(UInt64.self),
                    Array(try reader.readBytes(reader.remaining)))
        }
        guard format == VersionRecord.format else {
            throw StoreError(code: .unsupportedFormat, message: "StateLens record \"\(key)\" has format \(format); this build reads format \(VersionRecord.format)")
        }
        self.sequence = sequence
        date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: dateBits))
        parts = record.references
        if flags & VersionRecord.holdsValue != 0 {
            guard Set(try PartFormat.references(in: rest)).isSubset(of: Set(parts)) else {
                throw damaged("its template refers to parts the record does not reference")
            }
            template = rest
        } else {
            guard parts.isEmpty else { throw damaged("a version without a value references \(parts.count) parts") }
            template = nil
        }
    }

    var record: Record {
        var writer = ByteWriter(capacity: VersionRecord.headerSize)
        writer.append(VersionRecord.format)
        writer.append(template == nil ? 0 : VersionRecord.holdsValue)
        writer.append(sequence)
        writer.append(date.timeIntervalSinceReferenceDate.bitPattern)
        // The header, then the template copied once, straight into the value (a large state's
        // template is kilobytes: through the writer it was copied twice).
        var value = Data(capacity: VersionRecord.headerSize + (template?.count ?? 0))
        value.append(contentsOf: writer.bytes)
        if let template { value.append(contentsOf: template) }
        return Record(value: value, references: parts)
    }

    /// The canonical JSON of this version's value, nil after `reset`; parts are read from `snapshot`.
    func json(in snapshot: Snapshot) throws -> Data? {
        guard let template else { return nil }
        return Data(try PartFormat.expand(template) { [UInt8](try snapshot.get($0)) })
    }
}

extension Array where Element: Equatable {
    /// Whether some element equals the one before it (read only: no copy of a shared buffer).
    var hasAdjacentDuplicates: Bool {
        indices.dropFirst().contains { self[$0 - 1] == self[$0] }
    }

    /// Drops every element equal to the one before it: on a sorted array, the duplicates.
    mutating func removeAdjacentDuplicates() {
        guard count > 1 else { return }
        var kept = 1
        for index in 1 ..< count where self[index] != self[kept - 1] {
            self[kept] = self[index]
            kept += 1
        }
        removeLast(count - kept)
    }
}

extension Array where Element: Comparable {
    /// Whether this array, sorted ascending, holds `element` (binary search).
    func sortedContains(_ element: Element) -> Bool {
        sortedIndex(of: element) != nil
    }

    /// The index of `element` in this array, sorted ascending (binary search).
    func sortedIndex(of element: Element) -> Int? {
        let low = sortedInsertionIndex(of: element)
        return low < count && self[low] == element ? low : nil
    }

    /// The first index of this array, sorted ascending, whose element is not less than `element`.
    func sortedInsertionIndex(of element: Element) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < element { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether every element is at most the next.
    var isAscending: Bool {
        indices.dropFirst().allSatisfy { self[$0 - 1] <= self[$0] }
    }
}
