import ContentStore
import Foundation
import Synchronization

/// The server's side of sync over its Store: the sequence, pushes, pulls, blobs and tombstones.
///
/// Invariant owned here: every applied change gets the next sequence number in the same commit that
/// stores it, so the order of changes is the server's commit order, never a clock; a mutation ID is
/// applied at most once per client, however long the client was away (its record, with the highest
/// mutation applied, is never removed, and its outcomes are kept until it acknowledges them); a
/// tombstone is dropped only when every client not yet forgotten has pulled its container past it,
/// and the floor then rises so that any client further behind resyncs in full.
final class ServerEngine: Sendable {
    let store: Store
    let configuration: SyncServerConfiguration
    /// New sequences, for the live announcements.
    let announcements = Broadcast<UInt64>(bufferingPolicy: .bufferingNewest(1024))
    private let uploads = Atomic<Int>(0)

    init(store: Store, configuration: SyncServerConfiguration) {
        self.store = store
        self.configuration = configuration
    }

    /// How stale a client's "last seen" may be before a pull refreshes it.
    static let lastSeenPrecision: TimeInterval = 60

    /// Blob uploads stored so far (ones that added bytes the store did not hold).
    var blobsReceived: Int { uploads.load(ordering: .relaxed) }

    // MARK: Blobs

    func missing(_ digests: [Digest]) -> [Digest] {
        var seen: Set<Digest> = []
        return digests.filter { seen.insert($0).inserted && !store.contains($0) }
    }

    /// Stores an uploaded blob after checking that its bytes hash to `claimed`; returns whether it was new.
    func receive(_ data: Data, claimed: Digest) async throws -> Bool {
        let actual = Digest.sha256(data)
        guard actual == claimed else {
            throw HTTPFailure(status: 400, "blob \(claimed) has bytes whose SHA-256 is \(actual)")
        }
        let isNew = !store.contains(claimed)
        try await store.put(data)
        if isNew { uploads.add(1, ordering: .relaxed) }
        return isNew
    }

    /// Stores each blob of a batch whose bytes hash to its digest and fit `maximumBlobSize`; the
    /// others are refused alone (nothing of them stored). One result per frame, in order.
    func receive(batch frames: [BlobFrames.Frame]) async throws -> [BlobResults.Result] {
        var results: [BlobResults.Result] = []
        for frame in frames {
            let hex = frame.digest.hex
            guard let data = frame.data else {
                results.append(.init(digest: hex, status: 400, error: "blob \(hex) has no bytes"))
                continue
            }
            guard data.count <= configuration.maximumBlobSize else {
                results.append(.init(digest: hex, status: 413,
                                     error: "blob \(hex) is \(data.count) bytes; the limit is \(configuration.maximumBlobSize)"))
                continue
            }
            do {
                results.append(.init(digest: hex, status: try await receive(data, claimed: frame.digest) ? 201 : 200))
            } catch let failure as HTTPFailure {
                results.append(.init(digest: hex, status: failure.status, error: failure.message))
            }
        }
        return results
    }

    /// Frames of the wanted blobs in order (absent ones marked), stopping before the one that would
    /// take the answer past `budget` bytes, though never before the first: the client asks again
    /// for the rest.
    func blobs(_ wanted: [Digest], budget: Int) async throws -> Data {
        var answer = Data()
        for digest in wanted {
            let data = try await blob(digest)
            if !answer.isEmpty, answer.count + (data?.count ?? 0) > budget { break }
            BlobFrames.append(digest, data, to: &answer)
        }
        return answer
    }

    func blob(_ digest: Digest) async throws -> Data? {
        do {
            return try await store.get(digest)
        } catch let error as StoreError where error.code == .notFound {
            return nil
        }
    }

    // MARK: Push

    func push(_ request: PushRequest) async throws -> PushResponse {
        try Names.check(clientID: request.client)
        var prepared: [(PushRequest.Mutation, Result<StoredObject, SyncError>)] = []
        var digests: [Digest] = []
        for mutation in request.mutations {
            let object = Result { try mutation.object.stored(author: request.client) }.mapError {
                $0 as? SyncError ?? SyncError(code: .invalidArgument, message: "\($0)")
            }
            if case let .success(stored) = object { digests += stored.digests }
            prepared.append((mutation, object))
        }
        let lacking = missing(digests)
        guard lacking.isEmpty else { throw MissingBlobs(missing: lacking.map(\.hex)) }
        let now = configuration.now()
        let response: PushResponse
        do {
            response = try await store.write { [prepared] transaction in
                try Self.apply(prepared, from: request.client, acknowledged: request.acknowledged, now: now, in: &transaction)
            }
        } catch let error as StoreError where error.code == .missingBlob {
            // Collected between the check and the commit: the client uploads it again.
            throw MissingBlobs(missing: missing(digests).map(\.hex))
        }
        announcements.send(response.sequence)
        return response
    }

    private static func apply(_ mutations: [(PushRequest.Mutation, Result<StoredObject, SyncError>)], from clientID: String,
                              acknowledged: UInt64, now: Date, in transaction: inout Transaction) throws -> PushResponse {
        var meta = try ServerMeta(transaction.record(forKey: Keys.serverMeta))
        let clientKey = Keys.serverClient(clientID)
        var client = try transaction.record(forKey: clientKey).map { try ServerClient($0, key: clientKey) } ?? ServerClient(lastSeen: now)
        client.lastSeen = now
        for key in try transaction.keys(withPrefix: Keys.serverOutcomes(clientID)) {
            if let mutation = UInt64(key.dropFirst(Keys.serverOutcomes(clientID).count)), mutation <= acknowledged {
                try transaction.removeRecord(forKey: key)
            }
        }
        var results: [PushResponse.Result] = []
        for (mutation, object) in mutations {
            let outcomeKey = Keys.serverOutcome(clientID, mutation: mutation.mutation)
            if mutation.mutation <= client.applied {
                // A retry of a push whose answer was lost: the first answer again, nothing applied twice.
                let outcome = try transaction.record(forKey: outcomeKey).map { try ServerOutcome($0, key: outcomeKey) }
                    ?? ServerOutcome(status: 200, revision: 0, message: "already acknowledged")
                let current = try outcome.status == 200 ? nil : currentObject(mutation.object.container, mutation.object.id, in: transaction)
                results.append(.init(mutation: mutation.mutation, status: outcome.status, revision: outcome.revision,
                                     message: outcome.message.isEmpty ? nil : outcome.message, server: current.map(WireObject.init)))
                continue
            }
            let outcome: ServerOutcome
            var server: StoredObject?
            switch object {
            case let .failure(error):
                outcome = ServerOutcome(status: 400, revision: 0, message: error.message)
                server = try? currentObject(mutation.object.container, mutation.object.id, in: transaction)
            case var .success(object):
                let current = try currentObject(object.container, object.id, in: transaction)
                if let current, let revision = current.revision, revision > mutation.base, current.author != clientID {
                    outcome = ServerOutcome(status: 409, revision: revision,
                                            message: "\(object.container)/\(object.id) changed on the server (revision \(revision)) after revision \(mutation.base)")
                    server = current
                } else {
                    meta.sequence += 1
                    object.revision = meta.sequence
                    try store(object, replacing: current, in: &transaction)
                    outcome = ServerOutcome(status: 200, revision: meta.sequence, message: "")
                }
            }
            client.applied = max(client.applied, mutation.mutation)
            try transaction.setRecord(outcome.record, forKey: outcomeKey)
            results.append(.init(mutation: mutation.mutation, status: outcome.status, revision: outcome.status == 200 ? outcome.revision : nil,
                                 message: outcome.message.isEmpty ? nil : outcome.message, server: server.map(WireObject.init)))
        }
        try transaction.setRecord(client.record, forKey: clientKey)
        try transaction.setRecord(meta.record, forKey: Keys.serverMeta)
        return PushResponse(results: results, sequence: meta.sequence)
    }

    private static func currentObject(_ container: String, _ id: String, in transaction: Transaction) throws -> StoredObject? {
        guard (try? Names.check(container: container, id: id)) != nil else { return nil }
        let key = Keys.serverObjects + Keys.place(container: container, id: id)
        return try transaction.record(forKey: key).map { try StoredObject($0, container: container, id: id, key: key) }
    }

    /// Stores `object` (which has its new revision) and moves its sequence entry.
    private static func store(_ object: StoredObject, replacing current: StoredObject?, in transaction: inout Transaction) throws {
        if let old = current?.revision { try transaction.removeRecord(forKey: Keys.serverSequence(old)) }
        try transaction.setRecord(object.record, forKey: Keys.serverObjects + object.place)
        try transaction.setRecord(SequenceEntry.record(place: object.place), forKey: Keys.serverSequence(object.revision!))
    }

    // MARK: The server's own writes

    /// Writes `object` as the server's own change: the server is always right, so no base is checked.
    func write(_ object: SyncObject) async throws -> SyncObject {
        try Names.check(object)
        var version = StoredObject.tombstone(container: object.container, id: object.id, revision: nil, author: "")
        if !object.isDeleted {
            version.isDeleted = false
            version.body = try await store.put(object.body)
            for (name, data) in object.attachments { version.attachments[name] = try await store.put(data) }
        }
        let unnumbered = version
        let revision = try await store.write { transaction in
            var stored = unnumbered
            var meta = try ServerMeta(transaction.record(forKey: Keys.serverMeta))
            let current = try Self.currentObject(object.container, object.id, in: transaction)
            meta.sequence += 1
            stored.revision = meta.sequence
            try Self.store(stored, replacing: current, in: &transaction)
            try transaction.setRecord(meta.record, forKey: Keys.serverMeta)
            return meta.sequence
        }
        announcements.send(revision)
        var written = object
        written.revision = revision
        return written
    }

    // MARK: Pull

    /// The current version of one object (a tombstone while it is kept); nil when there is none.
    func object(container: String, id: String) async throws -> StoredObject? {
        let key = Keys.serverObjects + Keys.place(container: container, id: id)
        return try await store.record(forKey: key).map { try StoredObject($0, container: container, id: id, key: key) }
    }

    func pull(client clientID: String?, since: UInt64, container: String?, limit: Int) async throws -> PullResponse {
        if let clientID { try Names.check(clientID: clientID) }
        let response = try await store.read { snapshot -> PullResponse in
            let meta = try ServerMeta(snapshot.record(forKey: Keys.serverMeta))
            guard since == 0 || since >= meta.floor else {
                return PullResponse(changes: [], sequence: 0, more: false, resync: true)
            }
            var changes: [WireObject] = []
            for prefix in Keys.serverSequencePrefixes(after: since) {
                for key in try snapshot.keys(withPrefix: prefix) {
                    guard let record = try snapshot.record(forKey: key) else { continue }
                    let place = try SequenceEntry.place(record, key: key)
                    guard let (objectContainer, id) = Keys.parse(place: place) else {
                        throw RecordFormat.corrupted(key, "names no object")
                    }
                    guard container == nil || container == objectContainer else { continue }
                    let objectKey = Keys.serverObjects + place
                    guard let object = try snapshot.record(forKey: objectKey) else {
                        throw RecordFormat.corrupted(key, "names \(objectKey), which does not exist")
                    }
                    changes.append(WireObject(try StoredObject(object, container: objectContainer, id: id, key: objectKey)))
                    if changes.count == limit {
                        return PullResponse(changes: changes, sequence: changes.last!.revision!, more: true, resync: false)
                    }
                }
            }
            return PullResponse(changes: changes, sequence: meta.sequence, more: false, resync: false)
        }
        if let clientID, !response.resync { try await noteProgress(of: clientID, pulled: since, in: container) }
        return response
    }

    /// Records that `clientID` holds every change up to `pulled` (of `container`, or of all), and
    /// that it is alive.
    private func noteProgress(of clientID: String, pulled: UInt64, in container: String?) async throws {
        let key = Keys.serverClient(clientID)
        let now = configuration.now()
        let progressKey = container.map { Keys.serverProgress(clientID) + $0 }
        // Most pulls of a client in step change nothing worth a commit: skip it while the progress
        // is known and "last seen" is recent (retention is counted in days).
        let known = try await store.read { snapshot -> Bool in
            guard let record = try snapshot.record(forKey: key) else { return false }
            let client = try ServerClient(record, key: key)
            let held = try progressKey.map { try ContainerCursor.cursor(snapshot.record(forKey: $0), key: $0) } ?? client.pulled
            return held >= pulled && now.timeIntervalSince(client.lastSeen) < Self.lastSeenPrecision
        }
        guard !known else { return }
        try await store.write { transaction in
            var client = try transaction.record(forKey: key).map { try ServerClient($0, key: key) } ?? ServerClient(lastSeen: now)
            client.lastSeen = now
            if let progressKey {
                let previous = try ContainerCursor.cursor(transaction.record(forKey: progressKey), key: progressKey)
                if pulled > previous { try transaction.setRecord(ContainerCursor.record(pulled), forKey: progressKey) }
            } else {
                client.pulled = max(client.pulled, pulled)
            }
            try transaction.setRecord(client.record, forKey: key)
        }
    }

    // MARK: Tombstones

    /// Ignores clients silent longer than the retention (they resync when they return), then drops
    /// the tombstones every remaining client has pulled past in their container, in one commit.
    /// Returns how many tombstones went.
    @discardableResult
    func collectTombstones() async throws -> Int {
        let now = configuration.now()
        let retention = TimeInterval(configuration.clientRetention.components.seconds)
        return try await store.write { transaction in
            var meta = try ServerMeta(transaction.record(forKey: Keys.serverMeta))
            let progress = try Self.progressOfActiveClients(now: now, retention: retention, in: transaction)
            // No tombstone above what some active client holds of any container can go.
            let horizon = progress.map(\.highest).min() ?? meta.sequence
            var dropped = 0
            for key in try transaction.keys(withPrefix: Keys.serverSequence) {
                guard let revision = UInt64(key.dropFirst(Keys.serverSequence.count)), revision <= horizon else { break }
                guard let record = try transaction.record(forKey: key) else { continue }
                let place = try SequenceEntry.place(record, key: key)
                guard let (container, id) = Keys.parse(place: place),
                      progress.allSatisfy({ $0.holds(container) >= revision }),
                      let objectRecord = try transaction.record(forKey: Keys.serverObjects + place),
                      try StoredObject(objectRecord, container: container, id: id, key: Keys.serverObjects + place).isDeleted
                else { continue }
                try transaction.removeRecord(forKey: key)
                try transaction.removeRecord(forKey: Keys.serverObjects + place)
                meta.floor = max(meta.floor, revision)
                dropped += 1
            }
            if dropped > 0 { try transaction.setRecord(meta.record, forKey: Keys.serverMeta) }
            return dropped
        }
    }

    /// What one client holds: everything up to `pulled`, and of some containers more.
    private struct Progress {
        var pulled: UInt64
        var containers: [String: UInt64]
        func holds(_ container: String) -> UInt64 { max(pulled, containers[container] ?? 0) }
        var highest: UInt64 { max(pulled, containers.values.max() ?? 0) }
    }

    /// The progress of every client seen within the retention. A client silent longer is not
    /// waited for, but its record stays: it keeps the mutations it may still retry exactly-once.
    private static func progressOfActiveClients(now: Date, retention: TimeInterval, in transaction: Transaction) throws -> [Progress] {
        var active: [Progress] = []
        for key in try transaction.keys(withPrefix: Keys.serverClients) {
            guard let record = try transaction.record(forKey: key) else { continue }
            let client = try ServerClient(record, key: key)
            guard now.timeIntervalSince(client.lastSeen) <= retention else { continue }
            let prefix = Keys.serverProgress(String(key.dropFirst(Keys.serverClients.count)))
            var containers: [String: UInt64] = [:]
            for progressKey in try transaction.keys(withPrefix: prefix) {
                containers[String(progressKey.dropFirst(prefix.count))] =
                    try ContainerCursor.cursor(transaction.record(forKey: progressKey), key: progressKey)
            }
            active.append(Progress(pulled: client.pulled, containers: containers))
        }
        return active
    }

    var sequence: UInt64 {
        get async throws { try await ServerMeta(store.record(forKey: Keys.serverMeta)).sequence }
    }
}

/// A request the server refuses with a status and a message.
struct HTTPFailure: Error, Sendable {
    var status: Int
    var message: String
    init(status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}
