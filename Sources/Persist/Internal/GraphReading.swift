import ContentStore
import Foundation

/// A consistent view of the records and blobs: a store snapshot, or a transaction seeing its own
/// writes. Fetches are written once, over this.
protocol RecordSource {
    var layout: Layout { get }
    func record(forKey key: String) throws -> Record?
    func keys(withPrefix prefix: String) throws -> [String]
    func body(_ digest: Digest) throws -> Data
}

/// Bodies are canonical JSON: sorted keys, slashes unescaped, dates as `Double` seconds since the
/// reference date (exact), so equal values have equal bytes and are stored once.
enum BodyCoding {
    /// The entity's canonical JSON: written in one pass by ``CanonicalJSON`` when it covers the
    /// value, which is byte for byte what ``encoder`` writes, else by ``encoder``.
    static func encode<E: Entity>(_ entity: E) throws -> Data {
        if let bytes = CanonicalJSON.encode(entity) { return Data(bytes) }
        return try encoder.encode(entity)
    }

    /// One encoder for every save: its options are fixed, and `encode` keeps no state between
    /// calls (it is `Sendable`), so a write need not build and configure one.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .deferredToDate
        return encoder
    }()

    static func decode<E: Entity>(_ type: E.Type, from data: Data, id: UUID) throws -> E {
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .deferredToDate
            return try decoder.decode(E.self, from: data)
        } catch {
            throw PersistError.undecodable(entity: E.entityName, id: id, underlying: error)
        }
    }
}

extension RecordSource {
    func entityRecord(_ id: UUID) throws -> EntityRecord? {
        let key = layout.entity(id)
        return try record(forKey: key).map { try EntityRecord($0, key: key) }
    }

    /// The entity's record, which must exist and be an `entityName`.
    func existingEntity(_ id: UUID, named entityName: String) throws -> EntityRecord {
        guard let entity = try entityRecord(id) else { throw PersistError.unknownEntity(id) }
        guard entity.entityName == entityName else {
            throw PersistError.typeMismatch(id, expected: entityName, found: entity.entityName)
        }
        return entity
    }

    func loadEntity<E: Entity>(_ type: E.Type, id: UUID) throws -> E? {
        try Names.validate(E.entityName)
        guard let entity = try entityRecord(id) else { return nil }
        guard entity.entityName == E.entityName else {
            throw PersistError.typeMismatch(id, expected: E.entityName, found: entity.entityName)
        }
        return try BodyCoding.decode(E.self, from: try body(entity.body), id: id)
    }

    func loadAll<E: Entity>(_ type: E.Type) throws -> [E] {
        try Names.validate(E.entityName)
        let prefix = layout.typeIndexPrefix(E.entityName)
        return try keys(withPrefix: prefix).map { key in
            guard let id = UUID(uuidString: String(key.dropFirst(prefix.count))) else {
                throw RecordFormat.corrupted("not a type index key", key: key)
            }
            let entity = try existingEntity(id, named: E.entityName)
            return try BodyCoding.decode(E.self, from: try body(entity.body), id: id)
        }
    }

    /// The targets of `source`'s relations named `relation`, in relate order.
    func relations(from source: UUID, as relation: String) throws -> [(target: UUID, record: RelationRecord)] {
        try Names.validate(relation)
        let prefix = layout.relationsPrefix(from: source, as: relation)
        let found = try keys(withPrefix: prefix).map { key in
            guard let target = UUID(uuidString: String(key.dropFirst(prefix.count))), let record = try record(forKey: key) else {
                throw RecordFormat.corrupted("not a relation key", key: key)
            }
            return (target: target, record: try RelationRecord(record, key: key))
        }
        return found.sorted { $0.record.sortKey < $1.record.sortKey }
    }

    func loadRelated<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) throws -> [E] {
        try Names.validate(E.entityName)
        return try relations(from: source, as: relation).map { relation in
            let entity = try existingEntity(relation.target, named: E.entityName)
            return try BodyCoding.decode(E.self, from: try body(entity.body), id: relation.target)
        }
    }
}
