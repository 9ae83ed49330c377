internal import CContentStoreSupport
import Foundation

/// A growable byte buffer for one large, short-lived read: the checkpoint's body at open (over
/// 100 MB at a million blobs).
///
/// Owns: its memory, from ``cs_large_allocate`` (huge pages where the kernel gives them), so
/// filling it faults 2 MiB at a time rather than 4 KiB. As a `[UInt8]` the body took a page fault
/// per 4 KiB, a quarter of a million-blob open's faults, and most of an open's CPU is the kernel's
/// first-touch faults. Capacity that is never written costs no memory.
final class LargeBuffer {
    private(set) var count = 0
    private var capacity: Int
    private var memory: UnsafeMutableRawPointer

    /// A buffer with room for `capacity` bytes. Throws `io` when the memory cannot be mapped.
    init(reservingCapacity capacity: Int, path: String) throws {
        self.capacity = Swift.max(capacity, 1)
        memory = try Self.allocate(self.capacity, path: path)
    }

    deinit { cs_large_free(memory, capacity) }

    /// Appends `length` bytes that `fill` writes in place (a read straight into the buffer, with
    /// no copy through another): they count only if `fill` returns, so a frame that fails its
    /// check is not appended. Grows (to twice the room needed) when they do not fit.
    func append(_ length: Int, path: String, _ fill: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        guard length > 0 else { return }
        if length > capacity - count {
            let grown = Swift.max(2 * capacity, count + length)
            let larger = try Self.allocate(grown, path: path)
            larger.copyMemory(from: memory, byteCount: count)
            cs_large_free(memory, capacity)
            memory = larger
            capacity = grown
        }
        try fill(UnsafeMutableRawBufferPointer(start: memory + count, count: length))
        count += length
    }

    /// Calls `body` with the bytes appended so far.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: memory, count: count))
    }

    private static func allocate(_ bytes: Int, path: String) throws -> UnsafeMutableRawPointer {
        guard let memory = cs_large_allocate(bytes) else {
            throw StoreError.io("cannot map \(bytes) bytes of memory to read", path: path, cause: SystemError("mmap", errno: ENOMEM))
        }
        return memory
    }
}
