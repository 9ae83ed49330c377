/// Records, blob index and commit sequence: the state a checkpoint saves and the WAL evolves.
///
/// Live operations and recovery change it through the same methods, so a replayed log yields
/// exactly the state the live process had.
struct StoreState: Sendable {
    var records = SortedMap<String, Record>()
    var blobs = BlobIndex()
    var commitSequence: UInt64 = 0

    struct Inconsistency: Error, CustomStringConvertible {
        var description: String
    }

    /// The first reference in `changes` to a blob the index does not hold.
    func firstMissingReference(in changes: [LogRecord.Change]) -> (key: String, digest: Digest)? {
        for change in changes {
            for digest in change.record?.references ?? [] where blobs[digest] == nil {
                return (change.key, digest)
            }
        }
        return nil
    }

    /// Applies a commit: replaces each changed record and moves reference counts by the difference
    /// between the old and new references. Checked before anything changes, so a failure leaves
    /// the state untouched.
    mutating func apply(_ commit: LogRecord.Commit) throws(Inconsistency) {
        guard commit.sequence == commitSequence + 1 else {
            throw Inconsistency(description: "commit \(commit.sequence) follows commit \(commitSequence)")
        }
        if let missing = firstMissingReference(in: commit.changes) {
            throw Inconsistency(description: "record \"\(missing.key)\" references unknown blob \(missing.digest)")
        }
        var deltas: [Digest: Int] = [:]
        for change in commit.changes {
            for digest in records[change.key]?.references ?? [] { deltas[digest, default: 0] -= 1 }
            for digest in change.record?.references ?? [] { deltas[digest, default: 0] += 1 }
        }
        for (digest, delta) in deltas where delta != 0 {
            let current = Int(blobs[digest]?.refCount ?? 0)
            guard current + delta >= 0, current + delta <= Int(UInt32.max) else {
                throw Inconsistency(description: "reference count of \(digest) would become \(current + delta)")
            }
        }
        for (digest, delta) in deltas where delta != 0 {
            _ = blobs.adjustReferences(of: digest, by: delta, time: commit.time)
        }
        for change in commit.changes {
            if let record = change.record {
                records.updateValue(record, forKey: change.key)
            } else {
                records.removeValue(forKey: change.key)
            }
        }
        commitSequence = commit.sequence
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
        for digest in digests {
            if let entry = blobs[digest], entry.refCount != 0 || entry.isManifest {
                throw Inconsistency(description: "collection dropped \(digest) while \(entry.refCount) references remain or without its children")
            }
        }
        for digest in digests { blobs.remove(digest) }
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
