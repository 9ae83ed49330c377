import ContentStore
import Foundation
import Synchronization

/// A client's local state over its Store: objects, pending changes with their mutation IDs,
/// conflicts, cursors — and the sync runs that move them (ClientEngine+Run.swift).
///
/// Invariant owned here: a local change is durable, with its pending mark and a fresh mutation ID,
/// in the one commit that stores it, and a pending mark leaves only in the commit that records the
/// server's answer (applied, overruled or rejected — the last two keep the local version as a
/// conflict). So no local work is lost by a crash, a failed sync or a rejection.
final class ClientEngine: Sendable {
    let store: Store
    let clientID: String
    let keys: Keys.Client
    let configuration: SyncConfiguration
    let transport: any SyncTransport
    /// Newest kept: a reader that falls 1,024 events behind skips the oldest, never blocks a sync.
    let events = Broadcast<SyncEvent>(bufferingPolicy: .bufferingNewest(1024))
    let runs = SyncRuns()
    /// nil until the first exchange; then whether the last one reached the server.
    let isOnline = Mutex<Bool?>(nil)

    init(store: Store, clientID: String, configuration: SyncConfiguration, transport: any SyncTransport) throws {
        try Names.check(clientID: clientID)
        self.store = store
        self.clientID = clientID
        self.keys = Keys.Client(clientID)
        self.configuration = configuration
        self.transport = transport
    }

    deinit { SharedObjects.release(Self.key(store: store, clientID: clientID)) }

    /// The engine's key in `SharedObjects`: one engine per store and client ID in the process.
    static func key(store: Store, clientID: String) -> SharedObjects.Key {
        SharedObjects.Key(ClientEngine.self, store: store, name: clientID)
    }

    // MARK: Local changes

    func persist(_ object: SyncObject) async throws {
        try Names.check(object)
        var stored = StoredObject(container: object.container, id: object.id, revision: nil, isDeleted: false, author: "",
                                  body: try await store.put(object.body), attachments: [:])
        for (name, data) in object.attachments { stored.attachments[name] = try await store.put(data) }
        try await commitLocal(stored)
    }

    func delete(container: String, id: String) async throws {
        try Names.check(container: container, id: id)
        try await commitLocal(.tombstone(container: container, id: id, revision: nil, author: ""))
    }

    /// Stores a local version as pending, with the next mutation ID, in one commit.
    private func commitLocal(_ version: StoredObject) async throws {
        try await store.write { [self] transaction in try stage(version, in: &transaction) }
        events.send(.changed(container: version.container, ids: [version.id]))
    }

    /// Makes `version` the local one, pending with the next mutation ID. Its base stays the one of
    /// the change it replaces, if that was not pushed yet: the server has seen neither.
    private func stage(_ version: StoredObject, in transaction: inout Transaction) throws {
        let objectKey = keys.objects + version.place, pendingKey = keys.pending + version.place
        var state = try ClientState(transaction.record(forKey: keys.state), key: keys.state)
        let current = try transaction.record(forKey: objectKey).map {
            try StoredObject($0, container: version.container, id: version.id, key: objectKey)
        }
        let pending = try transaction.record(forKey: pendingKey).map { try PendingChange($0, key: pendingKey) }
        var version = version
        version.revision = current?.revision
        try transaction.setRecord(version.record, forKey: objectKey)
        let change = PendingChange(mutation: state.nextMutation, base: pending?.base ?? current?.revision ?? 0)
        try transaction.setRecord(change.record, forKey: pendingKey)
        state.nextMutation += 1
        try transaction.setRecord(state.record, forKey: keys.state)
    }

    // MARK: Local reads

    func object(container: String, id: String) throws -> SyncObject? {
        try Names.check(container: container, id: id)
        let key = keys.objects + Keys.place(container: container, id: id)
        return try store.read { snapshot in
            try snapshot.record(forKey: key).map {
                try materialize(StoredObject($0, container: container, id: id, key: key), from: snapshot)
            }
        }
    }

    func objects(in container: String) throws -> [SyncObject] {
        try Names.check(container, "container")
        let prefix = keys.objects + Keys.place(container: container, id: "")
        return try store.read { snapshot in
            try snapshot.keys(withPrefix: prefix).compactMap { key -> SyncObject? in
                guard let record = try snapshot.record(forKey: key) else { return nil }
                let stored = try StoredObject(record, container: container, id: String(key.dropFirst(prefix.count)), key: key)
                return stored.isDeleted ? nil : try materialize(stored, from: snapshot)
            }
        }
    }

    var pendingCount: Int {
        get throws { try store.keys(withPrefix: keys.pending).count }
    }

    func conflicts() throws -> [SyncConflict] {
        try store.read { snapshot in
            try snapshot.keys(withPrefix: keys.conflicts).compactMap { key in
                try conflict(at: key, in: snapshot)?.conflict
            }
        }
    }

    private func conflict(at key: String, in snapshot: Snapshot) throws -> (stored: StoredConflict, conflict: SyncConflict)? {
        guard let record = try snapshot.record(forKey: key),
              let (container, id) = Keys.parse(place: String(key.dropFirst(keys.conflicts.count)))
        else { return nil }
        let stored = try StoredConflict(record, container: container, id: id, key: key)
        let conflict = SyncConflict(local: try materialize(stored.local, from: snapshot),
                                    server: try stored.server.map { try materialize($0, from: snapshot) },
                                    reason: stored.reason)
        return (stored, conflict)
    }

    /// Keeping the local version makes it a new pending change on top of what the server holds;
    /// dropping it forgets it. Either way the conflict goes, in the same commit.
    func resolve(_ conflict: SyncConflict, keepingLocal: Bool) async throws {
        let place = Keys.place(container: conflict.local.container, id: conflict.local.id)
        let conflictKey = keys.conflicts + place
        try await store.write { [self] transaction in
            guard let record = try transaction.record(forKey: conflictKey) else {
                throw SyncError(code: .conflictNotFound, message: "no conflict is kept for \(conflict.local.container)/\(conflict.local.id)")
            }
            let stored = try StoredConflict(record, container: conflict.local.container, id: conflict.local.id, key: conflictKey)
            try transaction.removeRecord(forKey: conflictKey)
            if keepingLocal { try stage(stored.local, in: &transaction) }
        }
        if keepingLocal { events.send(.changed(container: conflict.local.container, ids: [conflict.local.id])) }
    }

    /// The object with its bytes, read (and verified) from the snapshot.
    func materialize(_ stored: StoredObject, from snapshot: Snapshot) throws -> SyncObject {
        guard !stored.isDeleted, let body = stored.body else {
            return .tombstone(container: stored.container, id: stored.id, revision: stored.revision)
        }
        var attachments: [String: Data] = [:]
        for (name, digest) in stored.attachments { attachments[name] = try snapshot.get(digest) }
        return SyncObject(container: stored.container, id: stored.id, body: try snapshot.get(body), attachments: attachments,
                          isDeleted: false, revision: stored.revision)
    }
}
