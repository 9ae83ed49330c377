#if CONTENTSTORE_TSAN
import ContentStore

/// ThreadSanitizer cannot see `Synchronization.Mutex`'s synchronization on Linux: in its builds this
/// module's `Mutex` is ContentStore's ThreadSanitizer-visible lock (see `TSanVisibleMutex`).
typealias Mutex = TSanVisibleMutex
#endif
