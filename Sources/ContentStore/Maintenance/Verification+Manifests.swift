extension LocalEngine {
    /// The references manifest nodes hold, counted from the nodes themselves (each is read from its
    /// pack): with the records' references, what every count must equal. A node that cannot be read
    /// is a `manifest` problem; the counts of its children then show as `refCount` problems too.
    func countManifestReferences(_ blobs: BlobIndex, _ problems: inout [VerificationReport.Problem]) throws -> [Digest: Int] {
        var counted: [Digest: Int] = [:]
        for (index, (digest, entry)) in blobs.entries.filter({ $0.value.isManifest }).enumerated() {
            // close() waits for this; stop promptly instead of finishing a long read.
            if index % 1024 == 1023 { try checkOpen() }
            let isRoot = blobs.manifestSizes[digest] != nil
            do {
                let node = try readManifestNode(digest, isRoot: isRoot, of: digest)
                for child in node.entries {
                    counted[child.digest, default: 0] += 1
                    if blobs[child.digest] == nil && counted[child.digest] == 1 {
                        problems.append(.init(kind: "missingBlob", message: "manifest node \(digest) lists blob \(child.digest), which the index lacks",
                                              digest: child.digest))
                    }
                }
            } catch let error as StoreError {
                problems.append(.init(kind: "manifest", message: error.message, path: error.path, offset: error.offset ?? entry.location.offset, digest: digest))
            }
        }
        return counted
    }

    /// Reads a chunked blob whole: every node and chunk checked, the content re-hashed against its digest.
    func verifyManifestData(_ digest: Digest, _ blobs: BlobIndex) throws {
        if let size = blobs.manifestSizes[digest] {
            try forEachChunk(ofChunkedBlob: digest, size: size, verify: true) { _ in }
        } else {
            _ = try readManifestNode(digest, isRoot: false, of: digest)
        }
    }
}
