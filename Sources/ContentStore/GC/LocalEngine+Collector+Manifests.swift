extension LocalEngine {
    /// The children of the unreferenced manifest nodes among `candidates`, read from their packs
    /// before collection takes the lock: dropping a node releases its children, and the WAL record
    /// that drops it lists them so replay needs no pack. A node that cannot be read is left out
    /// (and so kept) with a warning; `verify` reports it.
    func childrenOfManifestNodes(among candidates: [Digest]) -> [Digest: [Digest]] {
        let nodes = core.withLock { core -> [(digest: Digest, isRoot: Bool)] in
            // A store without chunked blobs (most) skips a lookup per candidate: in a large index
            // each is a cache miss, and the collection's cost should follow its garbage only.
            guard core.state.blobs.manifestNodeCount > 0 else { return [] }
            return candidates.compactMap { digest -> (digest: Digest, isRoot: Bool)? in
                guard let entry = core.state.blobs[digest], entry.isManifest, entry.refCount == 0 else { return nil }
                return (digest, core.state.blobs.manifestSizes[digest] != nil)
            }
        }
        var children: [Digest: [Digest]] = [:]
        for node in nodes {
            do {
                children[node.digest] = try readManifestNode(node.digest, isRoot: node.isRoot, of: node.digest).entries.map(\.digest)
            } catch {
                logger.error("manifest node cannot be read; it is not collected", metadata: [
                    "digest": "\(node.digest)", "error": "\(error)",
                ])
            }
        }
        return children
    }

    /// A manifest node a dry run would drop: when its count became zero, and the children it lists.
    struct PretendedDrop {
        var zeroSince: UInt32
        var children: [Digest]
    }

    /// What the passes after the first would drop once `drops` released their children, as the real
    /// collection decides it (StoreState.drop(manifests:) ages a released child like its parent),
    /// added to `report`; returns the entry bytes per pack. For dry runs, which drop nothing.
    func pretendCascade(from drops: [PretendedDrop], grace: Duration, report: inout GarbageCollectionReport) throws -> [UInt32: UInt64] {
        var released: [Digest: UInt32] = [:]
        var counted = Set<Digest>()
        var droppedBytes: [UInt32: UInt64] = [:]
        var level = drops
        while !level.isEmpty {
            var age: [Digest: UInt32] = [:]
            for drop in level {
                for child in drop.children {
                    released[child, default: 0] += 1
                    age[child] = max(age[child] ?? 0, drop.zeroSince)
                }
            }
            let freed = try core.withLock { core -> [(digest: Digest, entry: BlobEntry)] in
                guard core.isOpen else { throw Store.closedError }
                let now = nowSeconds
                let horizon = commits.published.withLock { [$0.horizon, snapshots.oldest].compactMap { $0 }.min() }
                return age.compactMap { child, parentAge -> (digest: Digest, entry: BlobEntry)? in
                    guard !counted.contains(child), let entry = core.state.blobs[child], entry.refCount == released[child] else { return nil }
                    let zeroSince = max(parentAge, entry.zeroSince)
                    guard LocalEngine.hasExpired(zeroSince: zeroSince, now: now, grace: grace), horizon.map({ zeroSince < $0 }) ?? true else { return nil }
                    var aged = entry
                    aged.zeroSince = zeroSince
                    return (child, aged)
                }
            }
            level = []
            for (digest, entry) in freed {
                counted.insert(digest)
                report.blobsRemoved += 1
                report.bytesFreed += entry.entryLength
                report.logicalBytesFreed += entry.contentLength
                droppedBytes[entry.location.pack, default: 0] += entry.entryLength
                guard entry.isManifest else { continue }
                // A node that cannot be read would be kept, with its children.
                guard let children = try? readManifestNode(digest, isRoot: false, of: digest).entries.map(\.digest) else { continue }
                level.append(PretendedDrop(zeroSince: entry.zeroSince, children: children))
            }
        }
        return droppedBytes
    }
}
