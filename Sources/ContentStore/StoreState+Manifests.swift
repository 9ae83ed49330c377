/// Manifest nodes in the state: placing a new node adds a reference to each child it lists, and
/// dropping one releases them. Live puts and collections and WAL replay all come through here, so
/// the counts after a replay equal those of the process that wrote the log.
extension StoreState {
    /// Places new manifest nodes (children before parents, as a put writes them). A node the index
    /// already holds is left as it is: its children already hold its references.
    mutating func apply(_ manifests: [LogRecord.ManifestPlacement]) throws(Inconsistency) {
        var placed = Set<Digest>()
        for manifest in manifests {
            if let missing = manifest.children.first(where: { blobs[$0] == nil && !placed.contains($0) }) {
                throw Inconsistency(description: "manifest node \(manifest.placement.digest) lists unknown blob \(missing)")
            }
            placed.insert(manifest.placement.digest)
        }
        for manifest in manifests where blobs[manifest.placement.digest] == nil {
            let digest = manifest.placement.digest
            blobs.place(manifest.placement)
            if let size = manifest.logicalSize { blobs.setManifestSize(size, of: digest) }
            for child in manifest.children {
                guard blobs.adjustReferences(of: child, by: 1, time: manifest.placement.time, fromRecords: false) else {
                    throw Inconsistency(description: "reference count of \(child) overflows")
                }
            }
        }
    }

    /// Drops manifest nodes chosen by collection and releases their children's references. A child
    /// whose count reaches zero takes the later of its own time and its parent's: it has been
    /// unreachable since the parent was (collection may take it in the same run), unless it was
    /// put again since.
    mutating func drop(manifests drops: [LogRecord.ManifestDrop]) throws(Inconsistency) {
        var released: [Digest: Int] = [:]
        for drop in drops {
            guard let entry = blobs[drop.digest], entry.isManifest, entry.refCount == 0 else {
                throw Inconsistency(description: "collection dropped manifest node \(drop.digest), which is not an unreferenced manifest node")
            }
            for child in drop.children { released[child, default: 0] += 1 }
        }
        for (child, count) in released where Int(blobs[child]?.refCount ?? 0) < count {
            throw Inconsistency(description: "collection released \(count) references to \(child), which has \(blobs[child]?.refCount ?? 0)")
        }
        for drop in drops {
            guard let parent = blobs.remove(drop.digest) else { continue }
            for child in drop.children {
                let time = max(parent.zeroSince, blobs[child]?.zeroSince ?? 0)
                _ = blobs.adjustReferences(of: child, by: -1, time: time, fromRecords: false)
            }
        }
    }
}
