import ContentStore
import Foundation

/// How DataArchive keys map to record keys. See Docs/dataarchive.md.
///
/// Record key = `"dataarchive/"` + the user's key, with two characters escaped so that every
/// string is a valid record key: U+0001 → U+0001 `1`, NUL → U+0001 `0`. Keys without either
/// character (nearly all) are stored verbatim after the prefix.
enum KeyCoding {
    static let prefix = "dataarchive/"
    private static let escape: Unicode.Scalar = "\u{1}"

    /// The record key for `key`, or a `StoreError` (`invalidArgument` for an empty key,
    /// `limitExceeded` for one longer than ``DataArchive/maximumKeyLength``).
    static func recordKey(for key: String) throws -> String {
        guard !key.isEmpty else {
            throw StoreError(code: .invalidArgument, message: "a DataArchive key must not be empty")
        }
        let escapes = key.utf8.reduce(into: 0) { count, byte in if byte < 2 { count += 1 } }
        let length = key.utf8.count + escapes
        guard length <= DataArchive.maximumKeyLength else {
            throw StoreError(
                code: .limitExceeded,
                message: "a DataArchive key is at most \(DataArchive.maximumKeyLength) UTF-8 bytes; this one is \(length) (\"\(abbreviated(key))\")")
        }
        guard escapes > 0 else { return prefix + key }
        var encoded = String.UnicodeScalarView()
        encoded.append(contentsOf: prefix.unicodeScalars)
        for scalar in key.unicodeScalars {
            switch scalar.value {
            case 0: encoded.append(escape); encoded.append("0")
            case 1: encoded.append(escape); encoded.append("1")
            default: encoded.append(scalar)
            }
        }
        return String(encoded)
    }

    /// The user's key for a record key written by ``recordKey(for:)``, or nil for a record key that
    /// is not one of DataArchive's.
    static func key(forRecordKey recordKey: String) -> String? {
        guard recordKey.hasPrefix(prefix) else { return nil }
        let encoded = recordKey.unicodeScalars.dropFirst(prefix.unicodeScalars.count)
        guard !encoded.isEmpty else { return nil }
        guard encoded.contains(escape) else { return String(encoded) }
        var decoded = String.UnicodeScalarView()
        var escaping = false
        for scalar in encoded {
            if escaping {
                switch scalar {
                case "0": decoded.append("\u{0}")
                case "1": decoded.append(escape)
                default: return nil
                }
                escaping = false
            } else if scalar == escape {
                escaping = true
            } else {
                decoded.append(scalar)
            }
        }
        return escaping ? nil : String(decoded)
    }

    /// A key shortened for a message.
    static func abbreviated(_ key: String) -> String {
        key.count > 60 ? String(key.prefix(60)) + "…" : key
    }
}

/// A key's versions as one record: the value is a tiny header, the references are the version
/// blobs, current value first, then the archives newest → oldest.
///
/// Value encoding (format 1): byte 0 = `0x01` (format); then the number of archives as an
/// unsigned LEB128 varint; nothing else. It must equal `references.count - 1`.
struct VersionList: Hashable, Sendable {
    static let format: UInt8 = 1

    /// Current value first, then the archives newest → oldest. Never empty.
    var versions: [Digest]

    init(versions: [Digest]) {
        precondition(!versions.isEmpty)
        self.versions = versions
    }

    var current: Digest { versions[0] }
    var archiveCount: Int { versions.count - 1 }

    init(record: Record, key: String) throws {
        func damaged(_ reason: String) -> StoreError {
            StoreError(code: .corrupted, message: "the DataArchive record for key \"\(KeyCoding.abbreviated(key))\" is damaged: \(reason)")
        }
        guard let format = record.value.first else { throw damaged("its value is empty") }
        guard format == VersionList.format else {
            throw StoreError(
                code: .unsupportedFormat,
                message: "the DataArchive record for key \"\(KeyCoding.abbreviated(key))\" has format \(format); this build reads format \(VersionList.format)")
        }
        // The archive count in the engine's varint coding (ByteReader.readVarint).
        let (archives, trailing): (UInt64, Int)
        do {
            (archives, trailing) = try record.value.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                _ = try reader.read(UInt8.self)
                return (try reader.readVarint(), reader.remaining)
            }
        } catch is ByteReader.VarintOverflow {
            throw damaged("its archive count overflows")
        } catch {
            throw damaged("its archive count is truncated")
        }
        guard trailing == 0 else { throw damaged("its value has \(trailing) trailing bytes") }
        guard archives < UInt64(Int.max), record.references.count == Int(archives) + 1 else {
            throw damaged("it counts \(archives) archives but references \(record.references.count) versions")
        }
        versions = record.references
    }

    var record: Record {
        var writer = ByteWriter(capacity: 4)
        writer.append(VersionList.format)
        writer.appendVarint(UInt64(archiveCount))
        return Record(value: Data(writer.bytes), references: versions)
    }
}
