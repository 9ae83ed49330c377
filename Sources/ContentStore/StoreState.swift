/// Records, blob index and commit sequence: the state a checkpoint saves and the WAL evolves.
///
/// Live operations and recovery change it through the same methods, so a replayed log yields
/// exactly the state the live process had.
struct StoreState: Sendable {
    var records = SortedMap<String, Record>()
    var blobs = BlobIndex()
    var commitSequence: UInt64 = 0
    /// The keys the last few commits changed.
    var recentCommits = RecentCommits()

    struct Inconsistency: Error, CustomStringConvertible {
        var description: String
    }

    /// A commit's changes made to the records (``stage(_:)``), the rest of the state not changed yet.
    struct StagedCommit {
        /// The changes that change something, in key order: what is logged.
        var changes: [LogRecord.Change] = []
        /// The record each of `changes` replaced (nil: none).
        var replaced: [Record?] = []
    }

    /// The first reference of `staged` to a blob the index does not hold. Only the references a
    /// change adds to its record's are looked up: the ones the record had are counted, so the index
    /// holds them (a counted blob is never dropped).
    func firstMissingReference(in staged: StagedCommit) -> (key: String, digest: Digest)? {
        for (change, old) in zip(staged.changes, staged.replaced) {
            var missing: Digest?
            Self.forEachDifference(from: old?.references ?? [], to: change.record?.references ?? []) { digest, delta in
                if missing == nil, delta > 0, blobs[digest] == nil { missing = digest }
            }
            if let missing { return (change.key, missing) }
        }
        return nil
    }

    /// Calls `body` with +1 for each reference `new` has more than `old` and -1 for each it has
    /// fewer (occurrences counted: the lists are multisets). When both lists are sorted, as the
    /// facades keep them, one merge pass skips the references they share, so a record of a hundred
    /// references that changes one costs a comparison per reference and two calls, not a hundred
    /// lookups; otherwise every reference of both is passed (the changes sum the same).
    static func forEachDifference(from old: [Digest], to new: [Digest], _ body: (Digest, Int) -> Void) {
        guard old != new else { return }
        guard isSorted(old), isSorted(new) else {
            for digest in old { body(digest, -1) }
            for digest in new { body(digest, 1) }
            return
        }
        var (oldIndex, newIndex) = (0, 0)
        while oldIndex < old.count, newIndex < new.count {
            if old[oldIndex] < new[newIndex] {
                body(old[oldIndex], -1)
                oldIndex += 1
            } else if new[newIndex] < old[oldIndex] {
                body(new[newIndex], 1)
                newIndex += 1
            } else {
                oldIndex += 1
                newIndex += 1
            }
        }
        for digest in old[oldIndex...] { body(digest, -1) }
        for digest in new[newIndex...] { body(digest, 1) }
    }

    private static func isSorted(_ digests: [Digest]) -> Bool {
        digests.indices.dropFirst().allSatisfy { !(digests[$0] < digests[$0 - 1]) }
    }

    /// Applies a commit: replaces each changed record and moves reference counts by the difference
    /// between the old and new references. Checked before the rest of the state changes, and undone
    /// on failure, so a failure leaves the state as it was.
    mutating func apply(_ commit: LogRecord.Commit) throws(Inconsistency) {
        guard commit.sequence == commitSequence + 1 else {
            throw Inconsistency(description: "commit \(commit.sequence) follows commit \(commitSequence)")
        }
        let staged = stage(commit.changes)
        let deltas: [Digest: Int]
        do throws(Inconsistency) {
            if let missing = firstMissingReference(in: staged) {
                throw Inconsistency(description: "record \"\(missing.key)\" references unknown blob \(missing.digest)")
            }
            deltas = try referenceDeltas(of: staged)
        } catch {
            undo(staged)
            throw error
        }
        complete(staged, deltas: deltas, time: commit.time)
    }

    /// Makes `changes` to the records, in place when the records' nodes are not shared: each key is
    /// walked to once, and the change gives back the record it replaces (in a large store each walk
    /// goes through cold nodes comparing long keys). Changes that leave a key as it was (removing a
    /// missing key, setting an equal record) are left out of the result, so an unchanged rewrite
    /// commits nothing. The rest of the state is untouched until ``complete(_:deltas:time:)``;
    /// ``undo(_:)`` puts the records back.
    mutating func stage(_ changes: [LogRecord.Change]) -> StagedCommit {
        var staged = StagedCommit()
        for change in changes {
            let old: Record?
            if let record = change.record {
                old = records.updateValue(record, forKey: change.key)
            } else {
                old = records.removeValue(forKey: change.key)
            }
            guard old != change.record else { continue }
            staged.changes.append(change)
            staged.replaced.append(old)
        }
        return staged
    }

    /// Puts back the records `staged` replaced (its keys are distinct, so in any order).
    mutating func undo(_ staged: StagedCommit) {
        for (change, old) in zip(staged.changes, staged.replaced) {
            if let old {
                records.updateValue(old, forKey: change.key)
            } else {
                records.removeValue(forKey: change.key)
            }
        }
    }

    /// How `staged` moves the reference counts; throws if a count would leave its range.
    func referenceDeltas(of staged: StagedCommit) throws(Inconsistency) -> [Digest: Int] {
        var deltas: [Digest: Int] = [:]
        for (change, old) in zip(staged.changes, staged.replaced) {
            Self.forEachDifference(from: old?.references ?? [], to: change.record?.references ?? []) { digest, delta in
                deltas[digest, default: 0] += delta
            }
        }
        for (digest, delta) in deltas where delta != 0 {
            let current = Int(blobs[digest]?.refCount ?? 0)
            guard current + delta >= 0, current + delta <= Int(UInt32.max) else {
                throw Inconsistency(description: "reference count of \(digest) would become \(current + delta)")
            }
        }
        return deltas
    }

    /// Ends a staged commit (the next in sequence) once it is logged: moves the reference counts by
    /// `deltas` (``referenceDeltas(of:)``) and remembers the keys it changed.
    mutating func complete(_ staged: StagedCommit, deltas: [Digest: Int], time: UInt32) {
        for (digest, delta) in deltas where delta != 0 {
            _ = blobs.adjustReferences(of: digest, by: delta, time: time)
        }
        commitSequence += 1
        recentCommits.note(staged.changes, sequence: commitSequence)
    }

    /// Restarts the grace period of a blob the index holds (a put of bytes the store has), so a
    /// collection deciding after it keeps the blob; false when the index lacks it. Not logged: a
    /// crash loses only the freshening of a blob no commit references yet.
    mutating func freshen(_ digest: Digest, time: UInt32) -> Bool {
        guard blobs[digest] != nil else { return false }
        blobs.freshen(digest, time: time)
        return true
    }

    mutating func apply(_ placements: [LogRecord.BlobPlacement]) {
        for placement in placements { blobs.place(placement) }
    }

    /// Drops blobs chosen by collection. Only unreferenced blobs may be dropped, and manifest nodes
    /// only with their children (``drop(manifests:)``).
    mutating func drop(_ digests: [Digest]) throws(Inconsistency) {
        for (position, digest) in digests.enumerated() {
            blobs.prefetch(after: position, in: digests)
            if let entry = blobs[digest], entry.refCount != 0 || entry.isManifest {
                throw Inconsistency(description: "collection dropped \(digest) while \(entry.refCount) references remain or without its children")
            }
        }
        for (position, digest) in digests.enumerated() {
            blobs.prefetch(after: position, in: digests)
            blobs.remove(digest)
        }
    }

    mutating func apply(_ record: LogRecord) throws(Inconsistency) {
        switch record {
        case .commit(let commit): try apply(commit)
        case .blobs(let placements): apply(placements)
        case .drop(_, let digests): try drop(digests)
        // Bytes for a pack, not state: recovery writes them back to the pack (``PackRepair``).
        case .packBytes: break
        case .manifests(let manifests): try apply(manifests)
        case .dropManifests(_, let drops): try drop(manifests: drops)
        }
    }
}
