internal import CContentStoreSupport

/// A word threads sleep on until another thread notifies: an event count (see
/// CContentStoreSupport.h), over a futex on Linux and a condition variable elsewhere. One
/// notification wakes every sleeper with one system call and hands nothing over, where a semaphore
/// per waiter costs a call per waiter, and a lock would make the woken threads queue for it.
///
/// A waiter takes ``key``, then checks its condition, then ``wait(_:timeoutNanoseconds:)``s with the
/// key; a notifier changes the condition (with sequentially consistent atomics, or under a lock),
/// then calls ``notifyAll()``. A notification between the check and the wait makes the wait return.
package final class EventCount: @unchecked Sendable {
    private let event: OpaquePointer

    package init() {
        // Fails only when calloc or pthread_mutex_init does: out of memory, as when Swift allocates.
        guard let event = cs_event_create() else { preconditionFailure("cannot allocate an event count") }
        self.event = event
    }

    deinit { cs_event_destroy(event) }

    /// Changes with every notification.
    package var key: UInt32 { cs_event_key(event) }

    /// Sleeps until a notification after `key` was taken, or `timeoutNanoseconds` pass (`nil`: no
    /// limit). May return spuriously.
    package func wait(_ key: UInt32, timeoutNanoseconds: Int64? = nil) {
        cs_event_wait(event, key, timeoutNanoseconds ?? -1)
    }

    /// Wakes every waiter.
    package func notifyAll() { cs_event_notify_all(event) }
}
