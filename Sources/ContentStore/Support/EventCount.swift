internal import CContentStoreSupport

/// A word threads sleep on until another thread notifies: an event count over a futex (see
/// CContentStoreSupport.h). One notification wakes every sleeper with one system call and hands
/// nothing over, where a semaphore per waiter costs a call per waiter, and a lock would make the
/// woken threads queue for it.
///
/// A waiter takes ``key``, then checks its condition, then ``wait(_:timeoutNanoseconds:)``s with the
/// key; a notifier changes the condition (with sequentially consistent atomics, or under a lock),
/// then calls ``notifyAll()``. A notification between the check and the wait makes the wait return.
final class EventCount: @unchecked Sendable {
    /// The word, then the count of sleepers.
    private let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 2)

    init() { word.initialize(repeating: 0, count: 2) }

    deinit { word.deallocate() }

    /// Changes with every notification.
    var key: UInt32 { cs_event_key(word) }

    /// Sleeps until a notification after `key` was taken, or `timeoutNanoseconds` pass (`nil`: no
    /// limit). May return spuriously.
    func wait(_ key: UInt32, timeoutNanoseconds: Int64? = nil) {
        cs_event_wait(word, key, timeoutNanoseconds ?? -1)
    }

    /// Wakes every waiter.
    func notifyAll() { cs_event_notify_all(word) }
}
