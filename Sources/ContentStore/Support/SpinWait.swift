internal import CContentStoreSupport
import Dispatch

/// A bounded busy-wait, for a condition another *running* thread is about to make true.
///
/// Sleeping on a futex and being woken costs tens of microseconds on a virtual machine (the
/// wake-up's inter-processor interrupt and the scheduler on both sides), more than a short piece of
/// work on another core takes. Where a thread expects the condition within a few microseconds, it
/// spins for at most a stated time before it sleeps (or gives up). Every caller bounds the spin: an
/// unbounded one would take a core from the thread it waits for on a machine with few.
package enum SpinWait {
    /// How many polls between readings of the clock: a poll is a few nanoseconds, a clock reading
    /// tens.
    private static let pollsPerClockReading = 32

    /// Polls `condition` until it holds or `nanoseconds` pass; returns whether it holds.
    package static func until(nanoseconds: UInt64, _ condition: () -> Bool) -> Bool {
        if condition() { return true }
        let deadline = DispatchTime.now().uptimeNanoseconds + nanoseconds
        while true {
            for _ in 0 ..< pollsPerClockReading {
                cs_cpu_relax()
                if condition() { return true }
            }
            if DispatchTime.now().uptimeNanoseconds >= deadline { return false }
        }
    }
}
