import ContentStore
import Foundation
import Synchronization

// The shared state of one name on one store: every LensStore opened on that pair in this process
// uses the same core (ContentStore's `SharedObjects`), so they see one value and notify each other's lenses.
//
// Invariants owned here:
// - `current` is a committed, durable version: it is replaced only after the store's `write` that
//   committed it has returned, and versions are published in commit (sequence) order, so readers
//   and observers never see a value that could be lost, nor values out of order.
// - Updates run inside the store's `write` body, which runs one at a time and sees every commit
//   before it (durable or not yet): so an update body always sees the latest value, and updates
//   that wait for their fsync at once share one group commit.
// - A body derives its base from the head record the transaction holds, never from memory alone:
//   `tentative` (the last version a body produced) is only a cache, used when its record is the
//   one the transaction sees.
//
// Lock order: `publication` before `current`. `tentative` is taken alone. Subscribers are called
// with `publication` held (so in commit order); they only yield to an AsyncStream.

/// A version as this process knows it.
@usableFromInline
final class Version<Root: Sendable>: Sendable {
    /// nil: the state holds no value (never written, or reset); lenses read their default.
    @usableFromInline
    let root: Root?
    /// The canonical tree of `root`, when built: the next update reuses its unchanged nodes.
    let tree: StateNode?
    /// The head record's content; nil when there is no head record.
    let stored: VersionRecord?
    /// `stored` as a record, encoded once: every update compares the head record it finds with
    /// it, and encoding a large state's (a template and references per chunk) for each comparison
    /// was a cost that grew with the state (Docs/statelens.md, "Speed").
    let record: Record?
    /// Whether `tree`'s parts are exactly `stored`'s: then every node an update reuses from
    /// `tree` names only parts the store holds for this version, and the update looks for new
    /// parts only where its cut made new chunks (``StateNode/newParts(excluding:reusedAreKnown:into:)``).
    /// True for a version this process wrote; checked for one it loaded (a store written by a
    /// build that cut chunks differently has the same JSON in other parts).
    let treeMatchesRecord: Bool
    /// The keys of the older versions kept beside this one, ascending, when this process wrote it
    /// (nil: not known). The next update starts from them instead of listing the store's keys:
    /// every StateLens writer changes the head record when it changes them, so a head record
    /// equal to this version's means these keys are still the ones stored.
    let versionKeys: [String]?

    init(root: Root?, tree: StateNode?, stored: VersionRecord?, record: Record? = nil, treeMatchesRecord: Bool = false, versionKeys: [String]? = nil) {
        self.root = root
        self.tree = tree
        self.stored = stored
        self.record = record ?? stored?.record
        self.treeMatchesRecord = tree != nil && treeMatchesRecord
        self.versionKeys = versionKeys
    }

    var sequence: UInt64 { stored?.sequence ?? 0 }
}

/// An observer of a core's versions: called with the old and new root and the new sequence.
typealias VersionObserver<Root> = @Sendable (_ old: Root?, _ new: Root?, _ sequence: UInt64) -> Void

@usableFromInline
final class LensCore<Root: Codable & Sendable & Equatable>: Sendable {
    let store: Store
    let name: String
    let keys: StateKeys

    private struct Publication {
        /// Versions committed by a body whose `write` has not returned yet, by sequence.
        var produced: [UInt64: Version<Root>] = [:]
        var observers: [Int: (deliver: VersionObserver<Root>, finish: @Sendable () -> Void)] = [:]
        var nextObserver = 0
    }

#if CONTENTSTORE_TSAN
    private let current: Mutex<Version<Root>>
#else
    /// Read by ``latestRoot()``, which is inlined into the reader's module (see there).
    @usableFromInline
    let current: Mutex<Version<Root>>
#endif
    private let publication = Mutex(Publication())
    private let tentative: Mutex<Version<Root>?> = Mutex(nil)

    init(store: Store, name: String, keys: StateKeys, initial: Version<Root>) {
        self.store = store
        self.name = name
        self.keys = keys
        self.current = Mutex(initial)
    }

    deinit {
        let observers = publication.withLock { publication in
            defer { publication.observers.removeAll() }
            return publication.observers.values
        }
        for observer in observers { observer.finish() }
        SharedObjects.release(Self.key(store: store, name: name))
    }

    /// The core's key in `SharedObjects`: one core per store, name and root type.
    static func key(store: Store, name: String) -> SharedObjects.Key {
        SharedObjects.Key(LensCore<Root>.self, store: store, name: name)
    }

    /// The latest published version: a pointer read under a lock no writer holds during I/O.
    var latest: Version<Root> { current.withLock { $0 } }

    /// The latest published root (nil: none stored), copied out while the lock is held: what
    /// ``LensStore/value`` reads, without retaining and releasing the version around the copy.
    ///
    /// Inlined into the caller so that the copy is specialized for `Root`: called through the
    /// generic entry point, the copy of a 64-field root went through its value witnesses and the
    /// metadata of `Root?` (Docs/statelens.md, "Speed"). ThreadSanitizer builds use a lock that is
    /// not inlinable.
#if CONTENTSTORE_TSAN
    @usableFromInline
    func latestRoot() -> Root? { current.withLock { $0.root } }
#else
    @inlinable
    func latestRoot() -> Root? { current.withLock { $0.root } }
#endif

    /// Reads the head record and decodes it with `decode` (which may migrate).
    static func load(store: Store, keys: StateKeys, decode: (Data) throws -> (Root, migrated: Bool)) throws -> Version<Root> {
        let (record, stored, json): (Record?, VersionRecord?, Data?) = try store.read { snapshot in
            guard let record = try snapshot.record(forKey: keys.head) else { return (nil, nil, nil) }
            let stored = try VersionRecord(record, key: keys.head)
            return (record, stored, try stored.json(in: snapshot))
        }
        guard let json else { return Version(root: nil, tree: nil, stored: stored, record: record) }
        let (root, migrated) = try decode(json)
        // A migrated root's tree is built by its first update; an unchanged root's now, so that the
        // first update already re-stores only what it changes.
        let tree = migrated ? nil : try TreeEncoder.encode(root, previous: nil)
        let matches = tree.map { VersionRecord.normalized($0.parts) == stored?.parts } ?? false
        return Version(root: root, tree: tree, stored: stored, record: record, treeMatchesRecord: matches)
    }

    // MARK: Updates

    /// Runs `change` on the latest value (nil: none stored) and, when the root it returns differs,
    /// commits it (nil: remove the value) as one durable commit, keeping `keptVersions` older
    /// versions. Publishes and notifies once durable. `decode` reads a head record this process did
    /// not write.
    func commit<T>(keptVersions: Int, decode: (Data) throws -> Root, _ change: (Root?) throws -> (new: Root?, result: T)) throws -> T {
        var produced: Version<Root>?
        let result: T
        do {
            result = try store.write { transaction -> T in
                produced = nil
                let base = try self.base(in: transaction, decode: decode)
                let (new, result) = try change(base.root)
                guard new != base.root else { return result }
                produced = try self.write(new, over: base, keptVersions: keptVersions, in: &transaction)
                return result
            }
        } catch {
            if let produced { forget(produced) }
            throw error
        }
        if let produced { publish(upTo: produced) }
        return result
    }

    /// The version the transaction builds on.
    private func base(in transaction: Transaction, decode: (Data) throws -> Root) throws -> Version<Root> {
        let head = try transaction.record(forKey: keys.head)
        // Two checks, not a loop over an array of the two: the array cost an allocation and the
        // generic metadata of `[Version<Root>?]` on every update.
        if let tentative = tentative.withLock({ $0 }), head == tentative.record { return tentative }
        let latest = latest
        if head == latest.record { return latest }
        // Written by another process sharing the store (a cluster instance): read it as it is.
        guard let head else { return Version(root: nil, tree: nil, stored: nil) }
        let stored = try VersionRecord(head, key: keys.head)
        let json = try stored.template.map { template in
            Data(try PartFormat.expand(template) { [UInt8](try store.get($0)) })
        }
        return Version(root: try json.map(decode), tree: nil, stored: stored, record: head)
    }

    /// Puts the parts `new` needs and sets the head (and version) records. REQUIRES: inside the
    /// store's `write` body.
    private func write(_ new: Root?, over base: Version<Root>, keptVersions: Int, in transaction: inout Transaction) throws -> Version<Root> {
        let sequence = base.sequence + 1
        let date = store.configuration.now()
        var tree: StateNode?
        var stored = VersionRecord(sequence: sequence, date: date, template: nil, parts: [])
        if let new {
            // `commit` found `new` unequal to `base.root`, the value `base.tree` was built from.
            let built = try TreeEncoder.encode(new, changedFrom: base.tree)
            var parts: [Digest: Part] = [:]
            built.newParts(excluding: base.stored?.parts ?? [], reusedAreKnown: base.treeMatchesRecord, into: &parts)
            // The digests were computed as the parts were built: the store need not hash again.
            for part in parts.values { try store.put(Data(part.bytes), knownDigest: part.digest) }
            stored = VersionRecord(sequence: sequence, date: date, template: built.fragment, parts: built.parts)
            tree = built
        }
        let record = stored.record
        try transaction.setRecord(record, forKey: keys.head)
        if keptVersions > 0, let previous = base.stored, let previousRecord = base.record {
            try transaction.setRecord(previousRecord, forKey: keys.version(previous.sequence))
        }
        let kept = try versionKeys(over: base, keptVersions: keptVersions, in: transaction)
        let removed = kept.count - min(kept.count, max(0, keptVersions))
        for key in kept.prefix(removed) { try transaction.removeRecord(forKey: key) }
        let version = Version(root: new, tree: tree, stored: stored, record: record, treeMatchesRecord: tree != nil,
                              versionKeys: Array(kept.dropFirst(removed)))
        tentative.withLock { $0 = version }
        publication.withLock { $0.produced[sequence] = version }
        return version
    }

    /// The version keys stored once `base`'s version record (if kept) is set: from `base` when it
    /// knows them, else listed from the store.
    private func versionKeys(over base: Version<Root>, keptVersions: Int, in transaction: Transaction) throws -> [String] {
        guard var known = base.versionKeys else { return try transaction.keys(withPrefix: keys.versionPrefix) }
        // The key just set sorts after every kept one: its sequence is the newest.
        if keptVersions > 0, let previous = base.stored, base.record != nil {
            let key = keys.version(previous.sequence)
            if known.last != key { known.append(key) }
        }
        return known
    }

    /// Drops a version whose commit failed.
    private func forget(_ version: Version<Root>) {
        publication.withLock { publication in
            if publication.produced[version.sequence] === version { publication.produced[version.sequence] = nil }
        }
    }

    /// Publishes every produced version up to `version` in sequence order, notifying as it goes.
    /// The versions before it are durable too: the log is synced in order. The versions replaced
    /// are let go of on ``DeferredRelease``'s thread: freeing a large state's previous root and
    /// tree is not the writer's work (Docs/statelens.md, "Speed").
    private func publish(upTo version: Version<Root>) {
        let replaced = publication.withLock { publication -> [Version<Root>] in
            var old = latest
            guard old.sequence < version.sequence else { return [] }
            var replaced = [old]
            for sequence in (old.sequence + 1) ... version.sequence {
                guard let next = publication.produced.removeValue(forKey: sequence) else { continue }
                current.withLock { $0 = next }
                // Most states have no observer: the loop's generic metadata is then not looked up.
                if !publication.observers.isEmpty {
                    for observer in publication.observers.values { observer.deliver(old.root, next.root, sequence) }
                }
                if next !== version { replaced.append(next) }
                old = next
            }
            if !publication.produced.isEmpty {
                publication.produced = publication.produced.filter { $0.key > version.sequence }
            }
            return replaced
        }
        if !replaced.isEmpty { DeferredRelease.shared.release(replaced) }
    }

    // MARK: Observers

    /// Calls `initial` with the current root, then `observer` for every later version, from one
    /// consistent point: no version is missed or seen twice. Returns the token for ``removeObserver(_:)``.
    /// `finish` is called if the core goes away first.
    func addObserver(initial: (Root?) -> Void, finish: @escaping @Sendable () -> Void, _ observer: @escaping VersionObserver<Root>) -> Int {
        publication.withLock { publication in
            initial(latest.root)
            defer { publication.nextObserver += 1 }
            publication.observers[publication.nextObserver] = (observer, finish)
            return publication.nextObserver
        }
    }

    func removeObserver(_ token: Int) {
        _ = publication.withLock { $0.observers.removeValue(forKey: token) }
    }
}
