import ContentStore
import Foundation

/// One consistent state of a persister's graph, from ``Persister/read(_:)``.
///
/// While it exists, the bodies it can read stay readable, whatever writers commit meanwhile.
public struct PersistSnapshot: Sendable {
    let snapshot: Snapshot
    let layout: Layout

    /// The entity with `id`, or nil when there is none.
    ///
    /// - Throws: ``PersistError/typeMismatch(_:expected:found:)`` when it is stored as another
    ///   entity, ``PersistError/undecodable(entity:id:underlying:)`` when its body does not decode.
    public func fetch<E: Entity>(_ type: E.Type, id: UUID) throws -> E? {
        try loadEntity(type, id: id)
    }

    /// Every entity of the type, sorted by ID.
    public func fetchAll<E: Entity>(_ type: E.Type) throws -> [E] {
        try loadAll(type)
    }

    /// The targets of `source`'s relations named `relation`, in the order they were related.
    public func related<E: Entity>(_ type: E.Type, from source: UUID, as relation: String) throws -> [E] {
        try loadRelated(type, from: source, as: relation)
    }
}

extension PersistSnapshot: RecordSource {
    func record(forKey key: String) throws -> Record? { try snapshot.record(forKey: key) }
    func keys(withPrefix prefix: String) throws -> [String] { try snapshot.keys(withPrefix: prefix) }
    func body(_ digest: Digest) throws -> Data { try snapshot.get(digest) }
}
