import ContentStore
import Foundation

/// The changes of one ``Persister/write(_:_:)``. Reads see the transaction's own writes.
///
/// Nothing is visible to others, or written, until the body passed to `write` returns; a thrown
/// error discards every change.
public struct PersistTransaction {
    var transaction: Transaction
    let layout: Layout
    private let store: Store
    /// The transaction as it started: listing its keys costs no pass over this write's changes.
    private let base: Transaction
    /// Each key this write touched, as it was before: the undo step's "before" side.
    private var originals: [String: Record?] = [:]
    /// The touched keys under each of their `/`-ended prefixes, so that listing a prefix (a type,
    /// an entity's relations) costs what it lists, not every change of a large write.
    private let touchedUnder: TouchedIndex
    /// Bodies saved by this write, so a fetch after a save decodes them without a read.
    private var savedBodies: [Digest: Data] = [:]
    /// Relate order of relations made by this write: its change number, then a running index.
    private let order: UInt64
    private var nextIndex: UInt32 = 0

    init(transaction: Transaction, layout: Layout, store: Store, order: UInt64) {
        self.transaction = transaction
        self.base = transaction
        self.layout = layout
        self.store = store
        self.order = order
        touchedUnder = TouchedIndex(prefix: layout.prefix)
    }

    // MARK: Reading

    /// The entity with `id` as this transaction sees it, or nil.
    ///
    /// - Throws: ``PersistError/typeMismatch(_:expected:found:)``, ``PersistError/undecodable(entity:id:underlying:)``.
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) throws -> E? {
        try loadEntity(type, id: id)
    }

    /// Every entity of the type as this transaction sees them, sorted by ID.
    public func fetchAll<E: Entity>(_ type: E.Type) throws -> [E] {
        try loadAll(type)
    }

    /// The targets of `source`'s relations named `relation`, in relate order, as this transaction sees them.
    public func related<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) throws -> [E] {
        try loadRelated(type, from: source, as: relation)
    }

    // MARK: Writing

    /// Inserts `entity`, or replaces the entity with its ID. Its relations stay.
    ///
    /// - Throws: ``PersistError/typeMismatch(_:expected:found:)`` when the ID belongs to an entity
    ///   of another name, ``PersistError/invalidName(_:)`` for a bad ``Entity/entityName``, or the
    ///   `EncodingError` of a body JSON cannot hold (a NaN, say).
    public mutating func save<E: Entity>(_ entity: E) throws {
        try Names.validate(E.entityName)
        let key = layout.entity(entity.id)
        // Read once: the same record is the undo step's "before" side (`set(_:forKey:current:)`).
        let stored = try transaction.record(forKey: key)
        let existing = try stored.map { try EntityRecord($0, key: key, expecting: E.entityName) }
        if let existing, existing.entityName != E.entityName {
            throw PersistError.typeMismatch(entity.id, expected: E.entityName, found: existing.entityName)
        }
        let body = try BodyCoding.encode(entity)
        let digest = Digest.sha256(body)
        guard existing?.body != digest else { return }
        if savedBodies[digest] == nil {
            try store.put(body, knownDigest: digest)  // hashed once: the digest above
            savedBodies[digest] = body
        }
        let saved = EntityRecord(entityName: E.entityName, body: digest)
        guard let stored else {
            try set(saved.record, forKey: key, current: nil)
            return try set(Record(), forKey: layout.typeIndex(E.entityName, entity.id))
        }
        try set(saved.record(replacing: stored), forKey: key, current: stored)
    }

    /// Deletes the entity, every relation from or to it, and, recursively, every target it relates
    /// with `cascadeDelete`.
    ///
    /// - Throws: ``PersistError/unknownEntity(_:)`` when there is no such entity,
    ///   ``PersistError/typeMismatch(_:expected:found:)`` when it is another type's.
    public mutating func delete<E: Entity>(_ type: E.Type, id: UUID) throws {
        try Names.validate(E.entityName)
        _ = try existingEntity(id, named: E.entityName)
        // A work list, not recursion: a cascade may be as long as the graph.
        var pending = [id]
        var visited: Set<UUID> = []
        while let next = pending.popLast() {
            guard visited.insert(next).inserted else { continue }
            pending += try removeEntity(next)
        }
    }

    /// Relates `source` to `target` under `relation`, after the relations already made under that
    /// name. Relating again keeps the relation's place and takes the new `cascadeDelete`.
    ///
    /// - Throws: ``PersistError/unknownEntity(_:)`` when either entity does not exist,
    ///   ``PersistError/invalidName(_:)`` for a bad relation name.
    public mutating func relate(_ source: UUID, to target: UUID, as relation: String, cascadeDelete: Bool = false) throws {
        try Names.validate(relation)
        try requireEntities(source, target)
        let key = layout.relation(from: source, to: target, as: relation)
        if let stored = try transaction.record(forKey: key) {
            var existing = try RelationRecord(stored, key: key)
            existing.cascadeDelete = cascadeDelete
            try set(existing.record, forKey: key)
            return
        }
        // Unrelated and related again in this write: only the net effect counts, so it keeps its place.
        if case .some(.some(let original)) = originals[key] {
            var restored = try RelationRecord(original, key: key)
            restored.cascadeDelete = cascadeDelete
            try set(restored.record, forKey: key)
        } else {
            try set(RelationRecord(cascadeDelete: cascadeDelete, order: order, index: nextIndex).record, forKey: key)
            nextIndex += 1
        }
        try set(Record(), forKey: layout.backlink(from: source, to: target, as: relation))
    }

    /// Removes the relation; removing one that does not exist changes nothing.
    ///
    /// - Throws: ``PersistError/unknownEntity(_:)`` when either entity does not exist,
    ///   ``PersistError/invalidName(_:)`` for a bad relation name.
    public mutating func unrelate(_ source: UUID, from target: UUID, as relation: String) throws {
        try Names.validate(relation)
        try requireEntities(source, target)
        try set(nil, forKey: layout.relation(from: source, to: target, as: relation))
        try set(nil, forKey: layout.backlink(from: source, to: target, as: relation))
    }

    // MARK: Internals

    private func requireEntities(_ ids: UUID...) throws {
        for id in ids where try record(forKey: layout.entity(id)) == nil {
            throw PersistError.unknownEntity(id)
        }
    }

    /// Removes one entity and its relations; returns the targets its cascading relations named.
    private mutating func removeEntity(_ id: UUID) throws -> [UUID] {
        guard let entity = try entityRecord(id) else { return [] }
        try set(nil, forKey: layout.entity(id))
        try set(nil, forKey: layout.typeIndex(entity.entityName, id))
        var cascade: [UUID] = []
        for key in try keys(withPrefix: layout.relationsPrefix(from: id)) {
            guard case .relation(let source, let relation, let target) = layout.parse(key), let stored = try record(forKey: key) else {
                throw RecordFormat.corrupted("not a relation key", key: key)
            }
            if try RelationRecord(stored, key: key).cascadeDelete { cascade.append(target) }
            try set(nil, forKey: key)
            try set(nil, forKey: layout.backlink(from: source, to: target, as: relation))
        }
        for key in try keys(withPrefix: layout.backlinksPrefix(to: id)) {
            guard case .backlink(let target, let source, let relation) = layout.parse(key) else {
                throw RecordFormat.corrupted("not a backlink key", key: key)
            }
            try set(nil, forKey: key)
            try set(nil, forKey: layout.relation(from: source, to: target, as: relation))
        }
        return cascade
    }

    /// Sets (or, with nil, removes) a record, noting what the key held before this write.
    private mutating func set(_ record: Record?, forKey key: String) throws {
        try set(record, forKey: key, current: transaction.record(forKey: key))
    }

    /// ``set(_:forKey:)`` when the caller has just read the key's record, `current`: a lookup in a
    /// large store's record tree is a walk of cold nodes, not worth doing twice.
    private mutating func set(_ record: Record?, forKey key: String, current: Record?) throws {
        if originals[key] == nil {
            originals[key] = .some(current)
            touchedUnder.note(key)
        }
        if let record {
            try transaction.setRecord(record, forKey: key)
        } else {
            try transaction.removeRecord(forKey: key)
        }
    }

    /// What this write changed, in key order: empty when every touched key is as it was.
    func diff() throws -> Diff {
        let changes = try originals.keys.sorted().compactMap { key -> Diff.Change? in
            let before = originals[key]!
            let after = try transaction.record(forKey: key)
            return before == after ? nil : Diff.Change(key: key, before: before, after: after)
        }
        return Diff(changes: changes)
    }
}

extension PersistTransaction: RecordSource {
    func record(forKey key: String) throws -> Record? { try transaction.record(forKey: key) }
    func keys(withPrefix prefix: String) throws -> [String] {
        guard prefix.hasSuffix("/"), prefix.count > layout.prefix.count else { return try transaction.keys(withPrefix: prefix) }
        var keys = Set(try base.keys(withPrefix: prefix))
        for key in touchedUnder.keys(under: prefix) {
            if try transaction.record(forKey: key) == nil { keys.remove(key) } else { keys.insert(key) }
        }
        return keys.sorted()
    }
    func body(_ digest: Digest) throws -> Data { try savedBodies[digest] ?? store.get(digest) }
}

/// The keys a write touched under each of their `/`-ended prefixes, indexed when a listing first
/// needs them: a write that lists nothing (a save) pays one append per key. A class, so that a
/// listing (a read) can index; copies of a transaction share it, which is harmless: a listing
/// takes each key it names as its own transaction has it.
private final class TouchedIndex {
    private let prefix: String
    private var pending: [String] = []
    private var keysUnder: [String: Set<String>] = [:]

    init(prefix: String) {
        self.prefix = prefix
    }

    func note(_ key: String) {
        pending.append(key)
    }

    func keys(under prefix: String) -> Set<String> {
        for key in pending {
            var end = key.index(after: self.prefix.endIndex)
            while let slash = key[end...].firstIndex(of: "/") {
                end = key.index(after: slash)
                keysUnder[String(key[..<end]), default: []].insert(key)
            }
        }
        pending = []
        return keysUnder[prefix] ?? []
    }
}
