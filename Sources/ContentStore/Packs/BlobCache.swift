import Foundation
import Synchronization

/// Decoded blobs that ``Store/get(_:)`` returned recently, so getting one again skips the pack read
/// and the decompression, which are most of a small blob's read. Bounded by the memory its items
/// take (``Store/Configuration/readCacheSize``): each item's bytes and its ``itemOverhead``, so the
/// bound holds for small blobs too; evicts by CLOCK (second chance), so a blob got again since the
/// hand last passed stays.
///
/// While blobs fit, they are kept decoded, and a hit costs no more than the lookup. Once the cache is
/// full, a blob whose pack entry is compressed very well (its zstd frame at most
/// ``compressedFormMaximumShare`` of the blob) is kept as that frame, and a hit decompresses it:
/// more of them fit in the same bytes, and a hit still skips the `pread` and the re-hash
/// (Docs/benchmarks/analysis.md §4, §21). A blob that compresses less is kept decoded: its frame
/// would save too little per hit to pay for the room.
///
/// A large blob (``secondUseMinimumSize`` or more, when the owner sets it) is admitted on its
/// second read only: its first read leaves its digest among the *ghosts*, digests read once whose
/// bytes together would fill the cache at most, and a read that finds it there admits it. A stream of
/// large blobs each read once, or a cycle over more large blobs than the cache holds, then neither
/// pushes out the blobs that do hit nor churns megabytes of memory on every read: admitting a MiB
/// that was never hit added 0.1–0.8 ms of CPU to its miss (freeing the evicted MiB, faulting in
/// fresh memory for the next; Docs/benchmarks/analysis.md §24). A large blob read twice within
/// what the cache could hold is kept, as before, and hits from its third read on.
///
/// It holds only bytes that passed verification as they were read from their pack (with
/// ``Store/Configuration/verifiesReads``, their re-hash), and serves them without hashing them
/// again: verification guards against damage on the disk, which a cached copy does not see, and
/// re-hashing every hit cost more than the rest of it. Content addressing means an entry never goes
/// stale; a blob that collection drops is no longer in the index, which `get` consults first, and
/// its entry ages out.
package final class BlobCache: Sendable {
    private struct Slot {
        var digest: Digest
        /// The blob, or with ``decodedLength`` the zstd frame it was decompressed from.
        var bytes: Data
        /// The blob's length when ``bytes`` is its frame; nil when ``bytes`` is the blob.
        var decodedLength: Int?
        var recentlyUsed: Bool
    }

    private struct State {
        var positions: [Digest: Int] = [:]
        /// The clock's ring, in no particular order.
        var slots: [Slot] = []
        var hand = 0
        var bytes = 0
        /// Large blobs read once and not admitted: the bytes each would take, and their order (oldest first).
        var ghosts: [Digest: Int] = [:]
        var ghostOrder: [Digest] = []
        var ghostBytes = 0
    }

    /// Bytes the held items take at most: each one's blob (or frame) and its ``itemOverhead``.
    let capacity: Int
    /// What an item holds beyond its blob's bytes, at most: its slot in the ring (an array up to
    /// twice as long as its count), its entry in the map (a power-of-two table at most three
    /// quarters full: up to 8/3 of an entry's room), and the `Data`'s storage object with the
    /// malloc headers of it and of its bytes (``dataStorageOverhead``). Uncounted, these were
    /// 242 bytes an item on average (Docs/benchmarks/analysis.md §25): 6% above the size with 4 KiB
    /// blobs, more than the blobs themselves below 256 bytes. Counted at their most, a full cache
    /// takes no more than its size.
    static let itemOverhead = 2 * MemoryLayout<Slot>.stride
        + (MemoryLayout<Digest>.stride + MemoryLayout<Int>.stride) * 8 / 3
        + dataStorageOverhead
    /// A heap `Data`'s storage object and the malloc headers of it and of its bytes (96 bytes
    /// measured with `mallinfo2`; the object's fields are not public, so this one is measured, and
    /// ``BlobCacheTests`` checks the whole sum against the heap a full cache takes).
    static let dataStorageOverhead = 96
    /// A blob whose frame is larger than this share of it is kept decoded. Per byte of cache, a
    /// decoded blob saves a whole miss (read, decode, re-hash) on each hit, a frame only the read and
    /// the re-hash: decoding is most of a small blob's miss (about 5 of 10 µs for 4 KiB of text,
    /// against 1 µs for a decoded hit), so a frame holds more blobs but saves less per hit, and pays
    /// only below (10 − 6) / (10 − 1) ≈ 0.4 of the blob (Docs/benchmarks/analysis.md §21). At 0.75
    /// the read set 3× the cache held half-size frames that each hit still decoded.
    static let compressedFormMaximumShare = 0.4
    /// Larger blobs are not cached: one would push out many small ones, and re-reading a large blob
    /// costs little more per byte than copying it.
    var largestCachedBlob: Int { capacity / 16 }
    /// Blobs at least this long are admitted on their second read (nil: every blob on its first).
    let secondUseMinimumSize: Int?
    /// The local engine's ``secondUseMinimumSize``: from this size, admitting a blob that is never
    /// hit costs its miss a measurable share (the memory it churns); below it, the cache's
    /// small-blob tuning (Docs/benchmarks/analysis.md §21) is unchanged.
    static let largeBlobMinimumSize = 256 << 10
    private let state = Mutex(State())

    /// A cache of at most `capacity` bytes; blobs of `secondUseMinimumSize` or more are admitted on
    /// their second read (the cluster engine's cache admits every blob on its first: its misses
    /// cross the network).
    package init(capacity: Int, secondUseMinimumSize: Int? = nil) {
        self.capacity = max(0, capacity)
        self.secondUseMinimumSize = secondUseMinimumSize
    }

    /// Bytes the held items take now, their ``itemOverhead`` included.
    var bytes: Int { state.withLock { $0.bytes } }

    /// The cached bytes of `digest`, marked recently used; nil when not cached. A blob kept as its
    /// frame is decompressed here, outside the lock.
    package func blob(_ digest: Digest) -> Data? {
        guard capacity > 0 else { return nil }
        let found = state.withLock { state -> (bytes: Data, decodedLength: Int?)? in
            guard let index = state.positions[digest] else { return nil }
            state.slots[index].recentlyUsed = true
            return (state.slots[index].bytes, state.slots[index].decodedLength)
        }
        guard let (bytes, decodedLength) = found else { return nil }
        guard let decodedLength else { return bytes }
        // The frame decompressed to bytes that hashed to the digest when it was read; decompression
        // is deterministic, so it does again. A frame that fails anyway is dropped, and read afresh.
        guard let blob = Self.decompress(bytes, count: decodedLength) else {
            remove(digest)
            return nil
        }
        return blob
    }

    /// Keeps `blob`, which the caller read and verified, evicting others to make room. `frame`, when
    /// given, is the zstd frame (without a dictionary) the blob was decompressed from: kept instead
    /// of the blob when the blob would not fit without evicting and the frame is small enough
    /// (``compressedFormMaximumShare``).
    package func insert(_ blob: Data, for digest: Digest, frame: UnsafeRawBufferPointer? = nil) {
        guard blob.count > 0, blob.count <= largestCachedBlob, blob.count + Self.itemOverhead <= capacity else { return }
        let compactFrame = frame.flatMap { Double($0.count) <= Double(blob.count) * Self.compressedFormMaximumShare ? $0 : nil }
        if let secondUseMinimumSize, blob.count >= secondUseMinimumSize,
           !admitsOnSecondUse(digest, size: compactFrame?.count ?? blob.count) {
            return
        }
        // Copied before the lock is taken; whether it is kept is decided under it.
        let compact = compactFrame.map { Data($0) }
        state.withLock { state in
            guard state.positions[digest] == nil else { return }
            let full = state.bytes + blob.count + Self.itemOverhead > capacity
            let slot = if let compact, full {
                Slot(digest: digest, bytes: compact, decodedLength: blob.count, recentlyUsed: false)
            } else {
                Slot(digest: digest, bytes: blob, decodedLength: nil, recentlyUsed: false)
            }
            while state.bytes + slot.bytes.count + Self.itemOverhead > capacity { evictOne(&state) }
            state.positions[digest] = state.slots.count
            state.slots.append(slot)
            state.bytes += slot.bytes.count + Self.itemOverhead
        }
    }

    /// Whether a large blob's read admits it: true when it was read before and is still among the
    /// ghosts; otherwise it becomes the newest ghost (taking `size`, the bytes it would be kept in),
    /// and the oldest ghosts go until they fit in ``capacity``.
    private func admitsOnSecondUse(_ digest: Digest, size: Int) -> Bool {
        state.withLock { state in
            if let size = state.ghosts.removeValue(forKey: digest) {
                state.ghostOrder.removeAll { $0 == digest }
                state.ghostBytes -= size
                return true
            }
            guard state.positions[digest] == nil else { return true }
            // Charged at least a sixteenth of the threshold, so tiny frames cannot make the list long.
            let charged = max(size, (secondUseMinimumSize ?? 0) / 16)
            state.ghosts[digest] = charged
            state.ghostOrder.append(digest)
            state.ghostBytes += charged
            while state.ghostBytes > capacity, !state.ghostOrder.isEmpty {
                let oldest = state.ghostOrder.removeFirst()
                state.ghostBytes -= state.ghosts.removeValue(forKey: oldest) ?? 0
            }
            return false
        }
    }

    /// The blob of `count` bytes a cached frame holds, in a buffer the returned `Data` owns; nil if
    /// the frame does not decompress to exactly that.
    private static func decompress(_ frame: Data, count: Int) -> Data? {
        let blob = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
        do {
            try frame.withUnsafeBytes { try Zstd.decompress($0, into: blob) }
        } catch {
            blob.deallocate()
            return nil
        }
        guard let base = blob.baseAddress else { return Data() }
        return Data(bytesNoCopy: base, count: count, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// Forgets `digest`.
    func remove(_ digest: Digest) {
        state.withLock { state in
            guard let index = state.positions[digest] else { return }
            remove(at: index, &state)
        }
    }

    private func evictOne(_ state: inout State) {
        while true {
            if state.hand >= state.slots.count { state.hand = 0 }
            if state.slots[state.hand].recentlyUsed {
                state.slots[state.hand].recentlyUsed = false
                state.hand += 1
            } else {
                remove(at: state.hand, &state)
                return
            }
        }
    }

    /// Moves the last slot into the gap, so the ring stays dense.
    private func remove(at index: Int, _ state: inout State) {
        let removed = state.slots[index]
        state.positions[removed.digest] = nil
        state.bytes -= removed.bytes.count + Self.itemOverhead
        let last = state.slots.removeLast()
        if index < state.slots.count {
            state.slots[index] = last
            state.positions[last.digest] = index
        }
    }
}
