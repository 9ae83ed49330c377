extension Store {
    /// The children of the unreferenced manifest nodes among `candidates`, read from their packs
    /// before collection takes the lock: dropping a node releases its children, and the WAL record
    /// that drops it lists them so replay needs no pack. A node that cannot be read is left out
    /// (and so kept) with a warning; `verify` reports it.
    func childrenOfManifestNodes(among candidates: [Digest]) -> [Digest: [Digest]] {
        let nodes = core.withLock { core in
            candidates.compactMap { digest -> (digest: Digest, isRoot: Bool)? in
                guard let entry = core.state.blobs[digest], entry.isManifest, entry.refCount == 0 else { return nil }
                return (digest, core.state.blobs.manifestSizes[digest] != nil)
            }
        }
        var children: [Digest: [Digest]] = [:]
        for node in nodes {
            do {
                children[node.digest] = try readManifestNode(node.digest, isRoot: node.isRoot, of: node.digest).entries.map(\.digest)
            } catch {
                logger.warning("manifest node cannot be read; it is not collected", metadata: [
                    "digest": "\(node.digest)", "error": "\(error)",
                ])
            }
        }
        return children
    }
}
