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
    /// The last few records read from the base, which does not change: a key read and then set (a
    /// facade's read-modify-write) is not looked up again when the commit finds what it replaces,
    /// a walk of cold nodes in a large store's record tree. Shared by copies of the transaction,
    /// which all read the same base.
    private let baseReads = BaseReads()
    /// The commit whose state `base` is (nil: not known, as in a cluster): a facade that kept what
    /// it wrote in that commit can take it from memory instead of walking the record tree.
    package let baseSequence: UInt64?

    /// A transaction over `base`, the state it reads (an engine's), which is the state after commit
    /// `baseSequence` when known.
    package init(base: any RecordView, limits: Store.Limits, baseSequence: UInt64? = nil) {
        self.base = base
        self.limits = limits
        self.baseSequence = baseSequence
    }

    /// The record under `key` as this transaction sees it.
    public func record(forKey key: String) throws -> Record? {
        try Store.validate(key: key, limits: limits)
        if let change = changes[key] { return change }
        let record = try base.record(forKey: key)
        baseReads.note(record, forKey: key)
        return record
    }

    /// ``record(forKey:)`` when the caller knows the base held `known` under `key` if it is the state
    /// after commit `sequence`: then no lookup, and the commit does not look it up either.
    package func record(forKey key: String, known: Record?, afterCommit sequence: UInt64) throws -> Record? {
        guard baseSequence == sequence else { return try record(forKey: key) }
        try Store.validate(key: key, limits: limits)
        if let change = changes[key] { return change }
        baseReads.note(known, forKey: key)
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

    /// Every change in key order, unchanged rewrites included: for an engine that drops those
    /// itself where it reads the rows anyway (the cluster's group commit), instead of reading each
    /// key once more here.
    package var pendingChanges: [(key: String, record: Record?)] {
        changes.map { (key: $0.key, record: $0.value) }
    }

    /// The effective changes in key order: the new record under each key, nil for a removal.
    /// Changes that leave a key as it was (removing a missing key, setting an identical record) are
    /// left out, so an unchanged rewrite commits nothing.
    package func effectiveChanges() throws -> [(key: String, record: Record?)] {
        try effectiveChangesWithReplaced().map { ($0.key, $0.record) }
    }

    /// ``effectiveChanges()`` with the record each replaces in the base (nil: none), for a commit
    /// that counts the references it drops: each key is looked up in the base once for both.
    package func effectiveChangesWithReplaced() throws -> [(key: String, record: Record?, replaced: Record?)] {
        try changes.compactMap { key, record in
            let replaced = try baseReads.record(forKey: key) ?? base.record(forKey: key)
            if record == replaced { return nil }
            return (key, record, replaced)
        }
    }
}

/// A transaction's last few reads of its base: a key, and the record it held (nil: none). A class,
/// so that reading (a non-mutating method) notes them.
private final class BaseReads {
    /// Enough for a read-modify-write of a few records; a larger transaction looks the rest up again.
    static let capacity = 4
    private var reads: [(key: String, record: Record?)] = []
    private var next = 0

    func note(_ record: Record?, forKey key: String) {
        if reads.count < Self.capacity {
            reads.append((key, record))
        } else {
            reads[next] = (key, record)
            next = (next + 1) % Self.capacity
        }
    }

    /// The record read under `key`: `.some(nil)` when the base had none, nil when not among the reads.
    func record(forKey key: String) -> Record?? {
        reads.first { $0.key == key }.map(\.record)
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
