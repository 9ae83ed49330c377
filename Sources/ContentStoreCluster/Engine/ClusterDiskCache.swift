import ContentStore
import Foundation

/// The optional on-disk cache of verified blobs (``ClusterConfiguration/cacheDirectory``,
/// Docs/cluster.md §8): `<dir>/v1/<hh>/<digest hex>` holding the uncompressed bytes.
///
/// Owns one invariant: it never serves bytes that do not hash to the digest asked for. A file is
/// re-hashed on every load and deleted on a mismatch; it is written to a temporary name and
/// renamed, so a reader never sees half a file. Blobs are immutable, so a file is never stale; a
/// cache needs no fsync (a lost file is read again from the object store).
struct ClusterDiskCache: Sendable {
    let directory: URL

    private func path(_ digest: Digest) -> URL {
        let hex = digest.hex
        return directory.appendingPathComponent("v1/\(hex.prefix(2))/\(hex)")
    }

    /// The verified bytes of `digest`, or nil when not cached (or the file was damaged).
    func load(_ digest: Digest) -> Data? {
        let file = path(digest)
        guard let data = try? Data(contentsOf: file) else { return nil }
        guard Digest.sha256(data) == digest else {
            try? FileManager.default.removeItem(at: file)
            return nil
        }
        return data
    }

    /// Keeps `data`, which was verified to hash to `digest`. Failures are ignored: a cache is optional.
    func store(_ data: Data, for digest: Digest) {
        let file = path(digest)
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: temporary)
            guard rename(temporary.path, file.path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
        }
    }
}
