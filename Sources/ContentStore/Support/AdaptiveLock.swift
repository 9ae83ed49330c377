#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A lock a running thread takes without a hand-off: glibc's adaptive mutex, which spins briefly
/// and then sleeps, and whose unlock wakes a sleeper without giving it the lock. A running thread may
/// take it first ("barging").
///
/// `Synchronization.Mutex` on Linux is a priority-inheritance futex: a contended unlock hands the lock
/// to a sleeping waiter, which must then be scheduled before anyone can proceed. For a lock taken by
/// many threads in turn on few cores, every acquisition then costs a wake-up on the critical path
/// (Docs/benchmarks/analysis.md, section 3). ThreadSanitizer sees this lock (it intercepts pthreads).
final class AdaptiveLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() {
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif  // Elsewhere the platform's default mutex (the hand-off cost measured here is Linux's).
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }

    /// Takes the lock if no one holds it; returns whether it did.
    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    func unlock() { pthread_mutex_unlock(mutex) }
}
