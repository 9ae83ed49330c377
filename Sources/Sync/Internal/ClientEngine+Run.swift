import ContentStore
import Foundation
import Synchronization

/// One sync run: push the pending changes made before it started, then pull.
extension ClientEngine {
    /// Pending changes sent in one push request.
    static let pushBatch = 256
    /// Changes asked for in one pull request.
    static let pullBatch = 1000
    /// Blob requests in flight at once (async-http-client keeps up to 8 connections per host).
    static let blobConcurrency = 8
    /// Blobs one worker moves: a few requests' worth, so that the workers share the load.
    static let blobGroup = 256
    /// Blobs up to this size travel in batches; larger ones alone (`PUT /v1/blobs/{digest}`).
    static let batchableBlobSize = 1 << 20
    /// A batch upload is sent once it holds this many bytes (well under the server's 16 MiB default).
    static let blobBatchBytes = 4 << 20

    func sync(_ container: String?) async throws -> SyncReport {
        if let container { try Names.check(container, "container") }
        return try await runs.run(container) { [self] scope in try await self.run(scope) }
    }

    private func run(_ container: String?) async throws -> SyncReport {
        let meter = Meter()
        let bound = try await ClientState(store.record(forKey: keys.state), key: keys.state).nextMutation
        var report = SyncReport()
        do {
            let (pushed, conflicts) = try await retrying { try await self.push(container, below: bound, meter: meter) }
            report.pushed = pushed
            report.conflicts = conflicts
            report.pulled = try await retrying { try await self.pull(container, meter: meter) }
        } catch {
            configuration.logger.error("sync failed", metadata: ["client": "\(clientID)", "error": "\(error)"])
            throw error
        }
        report.bytesSent = meter.sent.load(ordering: .relaxed)
        report.bytesReceived = meter.received.load(ordering: .relaxed)
        return report
    }

    // MARK: Push

    /// Pushes pending changes with mutation IDs below `bound` (those made before the run), in
    /// batches in mutation order. Returns how many the server applied and how many became conflicts.
    private func push(_ container: String?, below bound: UInt64, meter: Meter) async throws -> (pushed: Int, conflicts: Int) {
        var pushed = 0, conflicts = 0
        for places in Self.groups(of: try await pendingPlaces(container, below: bound), size: Self.pushBatch) {
            let batch = try await pendingItems(places, below: bound)
            guard !batch.isEmpty else { continue }
            let refused = try await uploadMissingBlobs(of: batch, meter: meter)
            let sendable = batch.filter { refused[$0.object.place] == nil }
            for (place, rejection) in refused {
                guard let change = batch.first(where: { $0.object.place == place }) else { continue }
                let server = try await fetchObject(change.object.container, change.object.id, meter: meter)
                try await record([PushResponse.Result(mutation: change.pending.mutation, status: rejection.status, revision: nil,
                                                      message: rejection.message, server: server)],
                                 for: [change], meter: meter)
                conflicts += 1
            }
            guard !sendable.isEmpty else { continue }
            let acknowledged = try await ClientState(store.record(forKey: keys.state), key: keys.state).acknowledged
            let request = PushRequest(client: clientID, acknowledged: acknowledged, mutations: sendable.map {
                PushRequest.Mutation(mutation: $0.pending.mutation, base: $0.pending.base, object: WireObject($0.object))
            })
            let response = try await exchange(TransportRequest(method: "POST", path: "/v1/push", body: try Wire.encode(request),
                                                               contentType: "application/json"), meter: meter)
            if response.status == 409, let missing = try? Wire.decode(MissingBlobs.self, from: response.body) {
                throw Transient(message: "the server lacks \(missing.missing.count) blobs a push names (collected meanwhile); uploading again")
            }
            let answer: PushResponse = try decode(response, "/v1/push")
            let outcome = try await record(answer.results, for: sendable, meter: meter)
            pushed += outcome.pushed
            conflicts += outcome.conflicts
        }
        return (pushed, conflicts)
    }

    struct PendingItem: Sendable {
        var pending: PendingChange
        var object: StoredObject
    }

    /// The places with a pending change below `bound`, in mutation order: listed once per run, so a
    /// push of n changes reads each pending record a bounded number of times.
    private func pendingPlaces(_ container: String?, below bound: UInt64) async throws -> [String] {
        let prefix = keys.pending + (container.map { Keys.place(container: $0, id: "") } ?? "")
        return try await store.read { [self] snapshot in
            var pending: [(mutation: UInt64, place: String)] = []
            for key in try snapshot.keys(withPrefix: prefix) {
                guard let record = try snapshot.record(forKey: key) else { continue }
                let change = try PendingChange(record, key: key)
                if change.mutation < bound { pending.append((change.mutation, String(key.dropFirst(keys.pending.count)))) }
            }
            return pending.sorted { $0.mutation < $1.mutation }.map(\.place)
        }
    }

    /// The pending changes at `places` as they are now, each with the local version to send; a place
    /// pushed meanwhile (by a run retried after a failure) or edited after the run began is left out.
    private func pendingItems(_ places: [String], below bound: UInt64) async throws -> [PendingItem] {
        try await store.read { [self] snapshot in
            var items: [PendingItem] = []
            for place in places {
                let key = keys.pending + place
                guard let record = try snapshot.record(forKey: key), let (objectContainer, id) = Keys.parse(place: place) else { continue }
                let pending = try PendingChange(record, key: key)
                guard pending.mutation < bound else { continue }
                let objectKey = keys.objects + place
                guard let objectRecord = try snapshot.record(forKey: objectKey) else {
                    throw RecordFormat.corrupted(key, "pending without a local version")
                }
                items.append(PendingItem(pending: pending, object: try StoredObject(objectRecord, container: objectContainer, id: id, key: objectKey)))
            }
            return items
        }
    }

    /// Asks which blobs the server lacks and uploads those. Returns the changes whose blob the server
    /// refused (4xx: too large, bytes not matching), by place, with the status and message.
    private func uploadMissingBlobs(of batch: [PendingItem], meter: Meter) async throws -> [String: (status: Int, message: String)] {
        let digests = Array(Set(batch.flatMap(\.object.digests)))
        guard !digests.isEmpty else { return [:] }
        let response = try await exchange(TransportRequest(method: "POST", path: "/v1/blobs/missing",
                                                           body: try Wire.encode(DigestList(digests: digests.map(\.hex))),
                                                           contentType: "application/json"), meter: meter)
        let missing: DigestList = try decode(response, "/v1/blobs/missing")
        let wanted = try missing.digests.map { hex in
            guard let digest = Digest(hex: hex) else { throw protocolViolation("/v1/blobs/missing named \"\(hex.prefix(80))\"") }
            return digest
        }
        let failures = try await concurrently(Self.groups(of: wanted, size: Self.blobGroup)) { [self] group in
            try await upload(group, meter: meter)
        }
        var refused: [String: (status: Int, message: String)] = [:]
        for (digest, status, message) in failures.joined() {
            for change in batch where change.object.digests.contains(digest) {
                refused[change.object.place] = (status, message)
            }
        }
        return refused
    }

    /// Uploads blobs, packing those up to ``batchableBlobSize`` into `POST /v1/blobs` requests of up to
    /// ``blobBatchBytes`` and sending larger ones alone. Returns the blobs the server refused.
    private func upload(_ digests: [Digest], meter: Meter) async throws -> [(Digest, Int, String)] {
        var refused: [(Digest, Int, String)] = []
        var batch = Data(), batched: [Digest] = []
        for digest in digests {
            let data = try await store.get(digest)
            if data.count > Self.batchableBlobSize {
                if let failure = try await uploadAlone(digest, data, meter: meter) { refused.append(failure) }
                continue
            }
            BlobFrames.append(digest, data, to: &batch)
            batched.append(digest)
            if batch.count >= Self.blobBatchBytes {
                refused += try await uploadBatch(batch, of: batched, meter: meter)
                batch = Data()
                batched = []
            }
        }
        if !batched.isEmpty { refused += try await uploadBatch(batch, of: batched, meter: meter) }
        return refused
    }

    private func uploadAlone(_ digest: Digest, _ data: Data, meter: Meter) async throws -> (Digest, Int, String)? {
        let upload = try await exchange(TransportRequest(method: "PUT", path: "/v1/blobs/\(digest.hex)", body: data), meter: meter)
        guard upload.status != 200, upload.status != 201 else { return nil }
        return (digest, upload.status, (try? Wire.decode(WireError.self, from: upload.body).error) ?? "status \(upload.status)")
    }

    private func uploadBatch(_ frames: Data, of digests: [Digest], meter: Meter) async throws -> [(Digest, Int, String)] {
        let response = try await exchange(TransportRequest(method: "POST", path: "/v1/blobs", body: frames,
                                                           contentType: "application/octet-stream"), meter: meter)
        if response.status == 413 {
            // A server configured with a smaller request limit: one blob at a time still fits.
            var refused: [(Digest, Int, String)] = []
            for digest in digests {
                if let failure = try await uploadAlone(digest, try await store.get(digest), meter: meter) { refused.append(failure) }
            }
            return refused
        }
        let answer: BlobResults = try decode(response, "/v1/blobs")
        guard answer.results.map(\.digest) == digests.map(\.hex) else {
            throw protocolViolation("/v1/blobs answered for other blobs than were sent")
        }
        var refused: [(Digest, Int, String)] = []
        for (digest, result) in zip(digests, answer.results) where result.status != 200 && result.status != 201 {
            refused.append((digest, result.status, result.error ?? "status \(result.status)"))
        }
        return refused
    }

    /// What the server holds for one object now (nil: nothing).
    private func fetchObject(_ container: String, _ id: String, meter: Meter) async throws -> WireObject? {
        let path = "/v1/object?container=\(Self.queryEscaped(container))&id=\(Self.queryEscaped(id))"
        let response = try await exchange(TransportRequest(method: "GET", path: path), meter: meter)
        if response.status == 404 { return nil }
        return try decode(response, "/v1/object")
    }

    /// Records the server's answers in one local commit, after fetching the blobs of the server
    /// versions that replace local ones.
    @discardableResult
    private func record(_ results: [PushResponse.Result], for batch: [PendingItem], meter: Meter) async throws -> (pushed: Int, conflicts: Int) {
        let byMutation = Dictionary(batch.map { ($0.pending.mutation, $0) }, uniquingKeysWith: { first, _ in first })
        var servers: [UInt64: StoredObject] = [:]
        for result in results where result.status != 200 {
            guard let server = result.server else { continue }
            let stored = try server.stored()
            try await fetchBlobs(stored.digests, meter: meter)
            servers[result.mutation] = stored
        }
        let fetched = servers
        let (pushed, newConflicts) = try await store.write { [self] transaction -> (Int, [SyncConflict.Reason: [StoredConflict]]) in
                var pushed = 0
                var conflicts: [SyncConflict.Reason: [StoredConflict]] = [:]
                var state = try ClientState(transaction.record(forKey: keys.state), key: keys.state)
                for result in results {
                    guard let item = byMutation[result.mutation] else { continue }
                    state.acknowledged = max(state.acknowledged, result.mutation)
                    if let conflict = try apply(result, to: item, server: fetched[result.mutation], in: &transaction) {
                        conflicts[conflict.reason, default: []].append(conflict)
                    } else {
                        pushed += 1
                    }
                }
                try transaction.setRecord(state.record, forKey: keys.state)
                return (pushed, conflicts)
        }
        let kept = newConflicts.values.flatMap { $0 }
        for conflict in kept {
            let reported = try await store.read { [self] snapshot in
                SyncConflict(local: try materialize(conflict.local, from: snapshot),
                             server: try conflict.server.map { try materialize($0, from: snapshot) }, reason: conflict.reason)
            }
            events.send(.conflict(reported))
            events.send(.changed(container: conflict.local.container, ids: [conflict.local.id]))
        }
        return (pushed, kept.count)
    }

    /// Applies one answer inside the commit; returns the conflict it kept, if any.
    private func apply(_ result: PushResponse.Result, to item: PendingItem, server: StoredObject?,
                       in transaction: inout Transaction) throws -> StoredConflict? {
        let place = item.object.place
        let objectKey = keys.objects + place, pendingKey = keys.pending + place
        let pending = try transaction.record(forKey: pendingKey).map { try PendingChange($0, key: pendingKey) }
        let local = try transaction.record(forKey: objectKey).map {
            try StoredObject($0, container: item.object.container, id: item.object.id, key: objectKey)
        } ?? item.object
        if result.status == 200 {
            let revision = result.revision ?? 0
            var applied = local
            applied.revision = revision == 0 ? local.revision : revision
            if pending?.mutation == item.pending.mutation {
                try transaction.removeRecord(forKey: pendingKey)
                if applied.isDeleted {
                    try transaction.removeRecord(forKey: objectKey)
                } else {
                    try transaction.setRecord(applied.record, forKey: objectKey)
                }
            } else if var pending {
                // Edited again while the push was in flight: the newer edit now builds on this revision.
                pending.base = max(pending.base, revision)
                try transaction.setRecord(pending.record, forKey: pendingKey)
                try transaction.setRecord(applied.record, forKey: objectKey)
            }
            return nil
        }
        let reason: SyncConflict.Reason = result.status == 409
            ? .overruled : .rejected(status: result.status, message: result.message ?? "status \(result.status)")
        let conflict = StoredConflict(local: local, server: reason == .overruled ? server : nil, reason: reason)
        try transaction.setRecord(conflict.record, forKey: keys.conflicts + place)
        try transaction.removeRecord(forKey: pendingKey)
        if let server, !server.isDeleted {
            try transaction.setRecord(server.record, forKey: objectKey)
        } else {
            try transaction.removeRecord(forKey: objectKey)
        }
        return conflict
    }

    // MARK: Pull

    /// Pulls every change after the cursor (all of them after a resync), applying each page in one
    /// commit. Objects with a pending change keep their local version: its push decides.
    private func pull(_ container: String?, meter: Meter) async throws -> Int {
        let cursorKey = container.map { keys.cursor($0) }
        let state = try await ClientState(store.record(forKey: keys.state), key: keys.state)
        var own: UInt64 = 0
        if let cursorKey { own = try await ContainerCursor.cursor(store.record(forKey: cursorKey), key: cursorKey) }
        var cursor = max(state.cursor, own)
        var pulled = 0
        // A pull from 0 is a full one even when the server does not ask for it: objects this client
        // pushed before it ever pulled may have been deleted and their tombstones dropped since.
        var resyncing = cursor == 0
        var seen: Set<String> = []
        while true {
            var path = "/v1/pull?since=\(cursor)&limit=\(Self.pullBatch)&client=\(Self.queryEscaped(clientID))"
            if let container { path += "&container=\(Self.queryEscaped(container))" }
            let page: PullResponse = try decode(try await exchange(TransportRequest(method: "GET", path: path), meter: meter), "/v1/pull")
            if page.resync {
                guard !resyncing else { throw protocolViolation("/v1/pull asked for a resync from 0") }
                configuration.logger.info("resyncing in full: the server dropped tombstones past our cursor",
                                          metadata: ["client": "\(clientID)", "cursor": "\(cursor)"])
                resyncing = true
                cursor = 0
                continue
            }
            let changes = try page.changes.map { try $0.stored() }
            try await fetchBlobs(changes.flatMap(\.digests), meter: meter)
            let next = page.sequence
            let changed = try await store.write { [self] transaction in
                let changed = try changes.filter { try applyPulled($0, in: &transaction) }
                try advance(to: next, cursorKey: cursorKey, in: &transaction)
                return changed
            }
            pulled += changed.count
            if resyncing { seen.formUnion(changes.map(\.place)) }
            for (changedContainer, objects) in Dictionary(grouping: changed, by: \.container) {
                events.send(.changed(container: changedContainer, ids: objects.map(\.id)))
            }
            cursor = next
            guard page.more else { break }
        }
        if resyncing { pulled += try await dropVanished(container, keeping: seen) }
        return pulled
    }

    /// Applies one pulled version unless a pending change holds the object; returns whether it changed anything.
    private func applyPulled(_ server: StoredObject, in transaction: inout Transaction) throws -> Bool {
        let objectKey = keys.objects + server.place
        guard try transaction.record(forKey: keys.pending + server.place) == nil else { return false }
        let current = try transaction.record(forKey: objectKey)
        var version = server
        version.author = ""
        if version.isDeleted {
            guard current != nil else { return false }
            try transaction.removeRecord(forKey: objectKey)
            return true
        }
        guard current != version.record else { return false }
        try transaction.setRecord(version.record, forKey: objectKey)
        return true
    }

    private func advance(to cursor: UInt64, cursorKey: String?, in transaction: inout Transaction) throws {
        if let cursorKey {
            try transaction.setRecord(ContainerCursor.record(cursor), forKey: cursorKey)
        } else {
            var state = try ClientState(transaction.record(forKey: keys.state), key: keys.state)
            state.cursor = cursor
            try transaction.setRecord(state.record, forKey: keys.state)
        }
    }

    /// After a full resync: removes synced local objects the server no longer has (their tombstones
    /// were dropped while this client was away), keeping every pending change.
    private func dropVanished(_ container: String?, keeping seen: Set<String>) async throws -> Int {
        let prefix = keys.objects + (container.map { Keys.place(container: $0, id: "") } ?? "")
        let dropped = try await store.write { [self] transaction -> [StoredObject] in
                var dropped: [StoredObject] = []
                for key in try transaction.keys(withPrefix: prefix) {
                    let place = String(key.dropFirst(keys.objects.count))
                    guard !seen.contains(place), try transaction.record(forKey: keys.pending + place) == nil,
                          let (objectContainer, id) = Keys.parse(place: place), let record = try transaction.record(forKey: key)
                    else { continue }
                    let stored = try StoredObject(record, container: objectContainer, id: id, key: key)
                    guard stored.revision != nil else { continue }
                    try transaction.removeRecord(forKey: key)
                    dropped.append(stored)
                }
                return dropped
        }
        for (changedContainer, objects) in Dictionary(grouping: dropped, by: \.container) {
            events.send(.changed(container: changedContainer, ids: objects.map(\.id)))
        }
        return dropped.count
    }

    // MARK: Blobs and HTTP

    /// Downloads the blobs the local store lacks, checking each against its digest.
    private func fetchBlobs(_ digests: [Digest], meter: Meter) async throws {
        let lacking = Array(Set(digests).filter { !store.contains($0) })
        _ = try await concurrently(Self.groups(of: lacking, size: Self.blobGroup)) { [self] group in
            try await fetch(group, meter: meter)
        }
    }

    /// Downloads blobs with `POST /v1/blobs/fetch`, asking again for those an answer left out.
    private func fetch(_ digests: [Digest], meter: Meter) async throws {
        var remaining = digests
        while !remaining.isEmpty {
            let response = try await exchange(TransportRequest(method: "POST", path: "/v1/blobs/fetch",
                                                               body: try Wire.encode(DigestList(digests: remaining.map(\.hex))),
                                                               contentType: "application/json"), meter: meter)
            guard response.status == 200 else { throw failure(response, "/v1/blobs/fetch") }
            let frames: [BlobFrames.Frame]
            do {
                frames = try BlobFrames.parse(response.body)
            } catch {
                throw protocolViolation("/v1/blobs/fetch: \(error)")
            }
            guard !frames.isEmpty, frames.count <= remaining.count,
                  zip(frames, remaining).allSatisfy({ pair in pair.0.digest == pair.1 }) else {
                throw protocolViolation("/v1/blobs/fetch answered with other blobs than were asked for")
            }
            for frame in frames {
                guard let data = frame.data else { throw protocolViolation("/v1/blobs/fetch: the server does not hold blob \(frame.digest)") }
                let stored = try await store.put(data)
                guard stored == frame.digest else {
                    throw protocolViolation("the server sent bytes hashing to \(stored) for blob \(frame.digest)")
                }
            }
            remaining.removeFirst(frames.count)
        }
    }

    /// `items` cut into consecutive groups of at most `size`.
    static func groups<Item>(of items: [Item], size: Int) -> [[Item]] {
        stride(from: 0, to: items.count, by: size).map { Array(items[$0 ..< min($0 + size, items.count)]) }
    }

    /// Runs `body` on every item, ``blobConcurrency`` at a time; the first failure cancels the rest.
    private func concurrently<Item: Sendable, Result: Sendable>(
        _ items: [Item], _ body: @escaping @Sendable (Item) async throws -> Result
    ) async throws -> [Result] {
        try await withThrowingTaskGroup(of: Result.self) { group in
            var next = items.makeIterator()
            for _ in 0 ..< Self.blobConcurrency {
                guard let item = next.next() else { break }
                group.addTask { try await body(item) }
            }
            var results: [Result] = []
            results.reserveCapacity(items.count)
            while let result = try await group.next() {
                results.append(result)
                if let item = next.next() { group.addTask { try await body(item) } }
            }
            return results
        }
    }

    /// One request; statuses that mean "try later" (5xx, 408, 429) and network failures throw
    /// ``Transient``; 401/403 throw `unauthorized`. Other statuses are returned to the caller.
    private func exchange(_ request: TransportRequest, meter: Meter) async throws -> TransportResponse {
        meter.sent.add(Int64(request.body?.count ?? 0), ordering: .relaxed)
        let response: TransportResponse
        do {
            response = try await transport.send(request)
        } catch {
            throw Transient(message: "\(error)")
        }
        meter.received.add(Int64(response.body.count), ordering: .relaxed)
        switch response.status {
        case 500..., 408, 429:
            throw Transient(message: "\(request.method) \(request.path.prefix { $0 != "?" }): status \(response.status)")
        case 401, 403:
            throw SyncError(code: .unauthorized, message: "\(request.method) \(request.path.prefix { $0 != "?" }): the server refused the token (status \(response.status))")
        default:
            markOnline(true)
            return response
        }
    }

    private func decode<T: Decodable>(_ response: TransportResponse, _ endpoint: String) throws -> T {
        guard response.status == 200 else { throw failure(response, endpoint) }
        do {
            return try Wire.decode(T.self, from: response.body)
        } catch {
            throw protocolViolation("\(endpoint) answered with JSON that is not a \(T.self): \(error)")
        }
    }

    private func failure(_ response: TransportResponse, _ endpoint: String) -> SyncError {
        let message = (try? Wire.decode(WireError.self, from: response.body).error) ?? "no message"
        return protocolViolation("\(endpoint) answered \(response.status): \(message)")
    }

    private func protocolViolation(_ message: String) -> SyncError {
        SyncError(code: .protocolViolation, message: message)
    }

    /// Runs `body`, retrying transient failures with exponential backoff; after the last retry the
    /// failure is `unavailable` and the pending work stays for a later run.
    private func retrying<T>(_ body: () async throws -> T) async throws -> T {
        var delay = configuration.initialBackoff
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let transient as Transient {
                markOnline(false)
                guard attempt < configuration.retries else {
                    throw SyncError(code: .unavailable, message: transient.message)
                }
                configuration.logger.debug("sync retrying", metadata: ["attempt": "\(attempt + 1)", "cause": "\(transient.message)"])
                attempt += 1
                try await Task.sleep(for: delay)
                delay = min(delay * 2, configuration.maximumBackoff)
            }
        }
    }

    func markOnline(_ online: Bool) {
        let changed = isOnline.withLock { state in
            defer { state = online }
            return state != online
        }
        if changed { events.send(online ? .online : .offline) }
    }

    static func queryEscaped(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#/")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}

/// A failure worth retrying: the server was unreachable, overloaded or failed.
struct Transient: Error, Sendable {
    var message: String
}

/// Bytes moved in one run.
final class Meter: Sendable {
    let sent = Atomic<Int64>(0)
    let received = Atomic<Int64>(0)
}
