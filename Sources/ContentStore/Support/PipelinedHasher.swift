import Dispatch
import Synchronization

/// SHA-256 on a second thread, of bytes handed over in order while the caller does other work: a
/// verified read of a compressed MiB hashes the decompressed start while zstd decodes the rest; a
/// large put is hashed while the caller probes whether it compresses.
///
/// Owns: stretches are hashed in the order handed over, each once; the hasher touches no handed-over
/// bytes after ``finish()`` or ``cancel()`` returns, so the caller may free them then. One helper
/// thread serves the process, held by one caller at a time: a caller that finds it taken hashes on
/// its own thread as before, so concurrent reads and puts never queue behind one another's hashing.
final class PipelinedHasher: @unchecked Sendable {
    // @unchecked: `hasher` is touched only by closures on `helper` (serial) until finish/cancel
    // waits for them, and by the owner after.
    private var hasher: SHA256.Hasher? = SHA256.Hasher()
    private static let helper = DispatchQueue(label: "ContentStore.read-verification")
    private static let taken = Atomic<Bool>(false)

    /// Nil when another read holds the helper.
    static func claim() -> PipelinedHasher? {
        taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged ? PipelinedHasher() : nil
    }

    private init() {}

    /// Hashes `stretch` (the next bytes of the buffer) on the helper. REQUIRES: it stays valid until finish or cancel.
    func update(_ stretch: UnsafeRawBufferPointer) {
        nonisolated(unsafe) let bytes = stretch
        Self.helper.async { self.hasher?.update(bytes) }
    }

    /// The digest of every stretch handed over, once all are hashed; releases the helper.
    func finish() -> Digest {
        let digest = Self.helper.sync { hasher.take()!.finalize() }
        Self.taken.store(false, ordering: .releasing)
        return digest
    }

    /// Waits for the stretches handed over (the buffer is about to be freed) and releases the helper.
    func cancel() {
        Self.helper.sync {}
        Self.taken.store(false, ordering: .releasing)
    }
}
