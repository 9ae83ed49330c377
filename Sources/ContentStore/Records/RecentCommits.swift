/// The keys each of the last few commits changed: a record known as of an earlier commit (what a
/// facade wrote itself) is still the base's when no commit since changed its key, so it is taken
/// from memory across commits to other keys instead of walking a large record tree for it
/// (Docs/benchmarks/analysis.md, section 50). Kept in ``StoreState``, so it changes with the commits
/// under the core lock; a state loaded from a checkpoint remembers none.
struct RecentCommits: Sendable {
    /// Enough for the few commits other writers make between two writes of one facade.
    static let capacity = 32
    /// A commit changing more keys is remembered as one that may have changed any key: remembering
    /// it would keep its keys alive, and checking it would cost what the lookup does.
    static let keysPerCommit = 16

    /// Commit `s`'s changed keys at `s % capacity`, nil for one that changed too many.
    private var changedKeys = [[String]?](repeating: nil, count: Self.capacity)
    /// The newest commit remembered, and how many before it (it included) are.
    private var newest: UInt64 = 0
    private var count = 0

    /// Notes commit `sequence`'s changes; a commit that does not follow the newest one remembered
    /// starts the memory over.
    mutating func note(_ changes: [LogRecord.Change], sequence: UInt64) {
        if count > 0, sequence != newest + 1 { count = 0 }
        newest = sequence
        count = min(count + 1, Self.capacity)
        changedKeys[Int(sequence % UInt64(Self.capacity))] = changes.count <= Self.keysPerCommit ? changes.map(\.key) : nil
    }

    /// Whether the commits after `earlier` up to `later` are all remembered and none changed `key`:
    /// then the record under it after `later` is the one after `earlier`. False when unsure.
    func unchanged(_ key: String, after earlier: UInt64, through later: UInt64) -> Bool {
        guard earlier < later else { return earlier == later }
        guard later <= newest, newest - earlier <= UInt64(count) else { return false }
        for sequence in earlier + 1 ... later {
            guard let keys = changedKeys[Int(sequence % UInt64(Self.capacity))], !keys.contains(key) else { return false }
        }
        return true
    }
}
