/// Facts about one stored blob.
public struct BlobInfo: Hashable, Sendable, Codable {
    /// The blob's digest.
    public var digest: Digest
    /// Uncompressed size in bytes.
    public var size: Int
    /// Bytes its pack entry occupies (compressed payload and header); for a chunked blob, its
    /// manifest root's (the chunks are shared between versions and counted in ``Statistics``).
    public var storedSize: Int
    /// Record references pointing at it.
    public var refCount: Int

    /// The facts another engine (the cluster's) reports.
    package init(digest: Digest, size: Int, storedSize: Int, refCount: Int) {
        self.digest = digest
        self.size = size
        self.storedSize = storedSize
        self.refCount = refCount
    }
}
