import Foundation

/// The changes of one ``Store/write(_:)`` call. Reads see the transaction's own writes.
///
/// Nothing is visible to others, or written, until the closure passed to `write` returns; a thrown
/// error discards every change.
public struct Transaction {
    private let base: any RecordView
    private let limits: Store.Limits
    /// The new state of each changed key, in key order; `.some(nil)` is a removal. Ordered, so a
    /// prefix listing merges two sorted runs and commit takes the changes without a sort.
    private(set) var changes = SortedMap<String, Record?>()
    private var encodedSize = 0
    /// The commit whose state `base` is (nil: not known, as in a cluster): a facade that kept what
    /// it wrote in that commit can take it from memory instead of walking the record tree.
    package let baseSequence: UInt64?
    /// The keys the commits up to `baseSequence` changed, as far as the engine remembers them.
    private let recentCommits: RecentCommits

    /// A transaction over `base`, the state it reads (an engine's), whose commit is not known.
    package init(base: any RecordView, limits: Store.Limits) {
        self.init(base: base, limits: limits, baseSequence: nil, recentCommits: RecentCommits())
    }

    /// A transaction over `base`, the state after commit `baseSequence`, whose engine remembers what
    /// the last commits up to it changed (`recentCommits`).
    init(base: any RecordView, limits: Store.Limits, baseSequence: UInt64?, recentCommits: RecentCommits) {
        self.base = base
        self.limits = limits
        self.baseSequence = baseSequence
        self.recentCommits = recentCommits
    }

    /// The record under `key` as this transaction sees it.
    public func record(forKey key: String) throws -> Record? {
        try Store.validate(key: key, limits: limits)
        if let change = changes[key] { return change }
        return try base.record(forKey: key)
    }

    /// ``record(forKey:)`` when the caller knows the store held `known` under `key` after commit
    /// `sequence`: no lookup when the base is that commit's state, or a later one and the engine
    /// remembers that no commit since changed `key` (a facade's own last write, with other writers'
    /// commits in between). A lookup otherwise, as in a cluster.
    package func record(forKey key: String, known: Record?, afterCommit sequence: UInt64) throws -> Record? {
        guard let baseSequence, recentCommits.unchanged(key, after: sequence, through: baseSequence) else {
            return try record(forKey: key)
        }
        try Store.validate(key: key, limits: limits)
        if let change = changes[key] { return change }
        return known
    }

    /// Keys starting with `prefix`, ascending, as this transaction sees them.
    ///
    /// O(k + m + log n) for k committed and m pending keys under the prefix, of n pending in all: the
    /// committed keys and the pending changes under the prefix are two ascending runs, merged.
    public func keys(withPrefix prefix: String) throws -> [String] {
        var committed = try base.keys(withPrefix: prefix)
        // A view is asked for UTF-8 byte order, which differs from `String`'s for keys that are not
        // in normal form; the merge needs `String`'s, as the pending changes are kept in it.
        if !zip(committed, committed.dropFirst()).allSatisfy({ $0 < $1 }) { committed.sort() }
        var keys: [String] = []
        keys.reserveCapacity(committed.count)
        var next = committed.startIndex
        changes.forEach(withPrefix: prefix) { key, change in
            while next < committed.endIndex && committed[next] < key {
                keys.append(committed[next])
                next += 1
            }
            if next < committed.endIndex && committed[next] == key { next += 1 }
            if change != nil { keys.append(key) }
        }
        keys.append(contentsOf: committed[next...])
        return keys
    }

    /// Sets the record under `key`. Its references must name blobs the store holds when the
    /// transaction commits (`missingBlob` otherwise).
    public mutating func setRecord(_ record: Record, forKey key: String) throws {
        try Store.validate(key: key, limits: limits)
        guard record.value.count <= limits.maximumValueLength else {
            throw StoreError.limitExceeded("the value for key \"\(Store.describe(key))\" is \(record.value.count) bytes; the limit is \(limits.maximumValueLength)")
        }
        guard record.references.count <= limits.maximumReferencesPerRecord else {
            throw StoreError.limitExceeded("the record for key \"\(Store.describe(key))\" has \(record.references.count) references; the limit is \(limits.maximumReferencesPerRecord)")
        }
        try account(key: key, size: LogRecord.Change.setOverhead + key.utf8.count + record.value.count + record.references.count * Digest.byteCount)
        changes.updateValue(record, forKey: key)
    }

    /// Removes the record under `key`; removing a missing key is no error.
    public mutating func removeRecord(forKey key: String) throws {
        try Store.validate(key: key, limits: limits)
        try account(key: key, size: LogRecord.Change.removalOverhead + key.utf8.count)
        changes.updateValue(nil, forKey: key)
    }

    private mutating func account(key: String, size: Int) throws {
        guard encodedSize + size <= limits.maximumTransactionSize else {
            throw StoreError.limitExceeded("the transaction exceeds \(limits.maximumTransactionSize) bytes at key \"\(Store.describe(key))\"")
        }
        encodedSize += size
    }

    /// Every change in key order, unchanged rewrites included: the engine drops those where it
    /// changes the records (the embedded engine's commit, the cluster's group commit), which finds
    /// the record each replaces anyway.
    package var pendingChanges: [(key: String, record: Record?)] {
        changes.map { (key: $0.key, record: $0.value) }
    }
}

extension Store {
    /// Keys are non-empty, at most `maximumKeyLength` UTF-8 bytes, without NUL. (A Swift `String` is
    /// always valid UTF-8.)
    static func validate(key: String, limits: Limits) throws {
        guard !key.isEmpty else { throw StoreError.invalidArgument("a key must not be empty") }
        guard key.utf8.count <= limits.maximumKeyLength else {
            throw StoreError.limitExceeded("key \"\(describe(key))\" is \(key.utf8.count) bytes; the limit is \(limits.maximumKeyLength)")
        }
        guard !containsNUL(key) else { throw StoreError.invalidArgument("key \"\(describe(key))\" contains NUL") }
    }

    /// `memchr` over the key's contiguous UTF-8 (every native string's): a byte-by-byte walk of the
    /// UTF-8 view costs an index check per byte, and a facade's write validates each key it reads
    /// and sets (a Persist write: five keys of ~60 bytes).
    private static func containsNUL(_ key: String) -> Bool {
        key.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false
        } ?? key.utf8.contains(0)
    }

    /// A key shortened and escaped for a message.
    static func describe(_ key: String) -> String {
        let shown = key.count > 80 ? String(key.prefix(80)) + "…" : key
        return shown.unicodeScalars.map { $0.value < 0x20 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined()
    }
}
