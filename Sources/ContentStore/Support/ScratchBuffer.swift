import Foundation
import Synchronization

/// A byte buffer the put path reuses from call to call, through a process-wide pool.
///
/// A buffer allocated per put is a `malloc`/`free` of a blob-sized block (above glibc's mmap
/// threshold, a fresh mapping whose pages the kernel faults in and zeroes), and the bytes read or
/// compressed into it land in memory that is cold in the cache. Pooled buffers stay mapped and
/// warm. Sendable because the pool hands each buffer to one thread at a time.
final class ScratchBuffer: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    private init(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 64)
    }

    deinit { storage.deallocate() }

    private static let pool = Mutex<[ScratchBuffer]>([])
    /// Buffers the pool keeps: two per core putting at once (the input and the compressed output),
    /// at most 16 (about 17 MiB) however many cores there are.
    private static let pooledLimit = min(2 * ProcessInfo.processInfo.activeProcessorCount, 16)
    /// Smallest buffer allocated, so that one buffer serves blobs up to the default chunking
    /// threshold (1 MiB) with a header in front, whatever size came first.
    static let minimumCapacity = 1 << 20 + 64 << 10
    /// Larger buffers are not kept: a rare huge blob should not pin its size in memory.
    private static let largestPooled = 16 << 20

    /// Runs `body` with `count` bytes of scratch memory (uninitialized, or left over from an earlier
    /// use). The memory must not escape `body`.
    static func with<R>(count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        let buffer = take(count) ?? ScratchBuffer(capacity: max(count, minimumCapacity))
        defer { giveBack(buffer) }
        return try body(UnsafeMutableRawBufferPointer(rebasing: buffer.storage[..<count]))
    }

    /// The smallest pooled buffer holding `count` bytes.
    private static func take(_ count: Int) -> ScratchBuffer? {
        pool.withLock { pool in
            let fitting = pool.indices.filter { pool[$0].storage.count >= count }
            return fitting.min { pool[$0].storage.count < pool[$1].storage.count }.map { pool.remove(at: $0) }
        }
    }

    private static func giveBack(_ buffer: ScratchBuffer) {
        guard buffer.storage.count <= largestPooled else { return }
        pool.withLock { pool in
            pool.append(buffer)
            if pool.count > pooledLimit, let smallest = pool.indices.min(by: { pool[$0].storage.count < pool[$1].storage.count }) {
                pool.remove(at: smallest)
            }
        }
    }
}
