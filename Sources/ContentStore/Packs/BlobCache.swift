import Foundation
import Synchronization

/// Decoded blobs that ``Store/get(_:)`` returned recently, so getting one again skips the pack read
/// and the decompression, which are most of a small blob's read. Bounded by the bytes of the blobs
/// it holds (``Store/Configuration/readCacheSize``); evicts by CLOCK (second chance), so a blob got
/// again since the hand last passed stays.
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
        var blob: Data
        var recentlyUsed: Bool
    }

    private struct State {
        var positions: [Digest: Int] = [:]
        /// The clock's ring, in no particular order.
        var slots: [Slot] = []
        var hand = 0
        var bytes = 0
    }

    /// Bytes of blobs held at most.
    let capacity: Int
    /// Larger blobs are not cached: one would push out many small ones, and re-reading a large blob
    /// costs little more per byte than copying it.
    var largestCachedBlob: Int { capacity / 16 }
    private let state = Mutex(State())

    package init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// Bytes of the blobs held now.
    var bytes: Int { state.withLock { $0.bytes } }

    /// The cached bytes of `digest`, marked recently used; nil when not cached.
    package func blob(_ digest: Digest) -> Data? {
        guard capacity > 0 else { return nil }
        return state.withLock { state in
            guard let index = state.positions[digest] else { return nil }
            state.slots[index].recentlyUsed = true
            return state.slots[index].blob
        }
    }

    /// Keeps `blob`, which the caller read and verified, evicting others to make room.
    package func insert(_ blob: Data, for digest: Digest) {
        guard blob.count > 0, blob.count <= largestCachedBlob else { return }
        state.withLock { state in
            guard state.positions[digest] == nil else { return }
            while state.bytes + blob.count > capacity { evictOne(&state) }
            state.positions[digest] = state.slots.count
            state.slots.append(Slot(digest: digest, blob: blob, recentlyUsed: false))
            state.bytes += blob.count
        }
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
        state.bytes -= removed.blob.count
        let last = state.slots.removeLast()
        if index < state.slots.count {
            state.slots[index] = last
            state.positions[last.digest] = index
        }
    }
}
