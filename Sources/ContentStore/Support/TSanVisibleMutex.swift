#if CONTENTSTORE_TSAN
import Synchronization

/// ThreadSanitizer does not see the synchronization of `Synchronization.Mutex` on Linux (its
/// contended paths run in the uninstrumented Synchronization library), so it reports races on the
/// very state the lock protects. In ThreadSanitizer builds (`-Xswiftc -DCONTENTSTORE_TSAN`, as
/// `make sanitize` builds) this type shadows it: the same lock, plus an atomic
/// each holder reads with acquire ordering after locking and writes with release ordering before
/// unlocking, an edge ThreadSanitizer does see. Other builds use `Synchronization.Mutex` directly.
///
/// Every module of the package that takes locks shadows `Mutex` with it the same way
/// (`typealias Mutex = TSanVisibleMutex`, in its TSanVisibleMutex.swift).
package struct TSanVisibleMutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    private let base: Synchronization.Mutex<Value>
    private let edge = Atomic<UInt>(0)

    package init(_ initialValue: consuming sending Value) { base = Synchronization.Mutex(initialValue) }

    package borrowing func withLock<Result: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        try base.withLock { (value: inout sending Value) throws(E) -> sending Result in
            _ = edge.load(ordering: .acquiring)
            defer { edge.wrappingAdd(1, ordering: .releasing) }
            return try body(&value)
        }
    }
}

/// Shadows `Synchronization.Mutex` within this module (see ``TSanVisibleMutex``).
typealias Mutex = TSanVisibleMutex
#endif
