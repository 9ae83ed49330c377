import Foundation

/// What Persist throws besides the store's own `StoreError`s (I/O, a closed store, damage) and the
/// errors a body throws. A write that throws commits nothing.
public enum PersistError: Error {
    /// A relation named an entity that does not exist, or a delete or unrelate named one.
    case unknownEntity(UUID)
    /// The entity with this ID is stored under another entity name than the type asked for.
    case typeMismatch(UUID, expected: String, found: String)
    /// The stored body of the entity no longer decodes as the type's Swift type.
    case undecodable(entity: String, id: UUID, underlying: any Error)
    /// A persister, entity or relation name is empty, contains NUL, or is over 256 UTF-8 bytes.
    case invalidName(String)
}

extension PersistError: CustomStringConvertible {
    /// A message naming the entity, the names or the cause.
    public var description: String {
        switch self {
        case .unknownEntity(let id):
            return "Persist: no entity with ID \(id)"
        case .typeMismatch(let id, let expected, let found):
            return "Persist: entity \(id) is a \"\(found)\", not a \"\(expected)\""
        case .undecodable(let entity, let id, let underlying):
            return "Persist: the body of \"\(entity)\" \(id) does not decode: \(underlying)"
        case .invalidName(let name):
            let shown = name.utf8.count > 80 ? String(name.prefix(80)) + "…" : name
            return "Persist: invalid name \"\(shown.replacingOccurrences(of: "\0", with: "\\0"))\" "
                + "(\(name.utf8.count) bytes): names are non-empty UTF-8 without NUL, at most \(Names.maximumLength) bytes"
        }
    }
}
