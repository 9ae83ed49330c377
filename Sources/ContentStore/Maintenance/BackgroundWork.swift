import Dispatch
import Synchronization

/// Work that runs beside the caller — automatic checkpoints, periodic collection, the small-blob
/// dictionary's training — which ``Store/close()`` stops and waits for.
final class BackgroundWork: Sendable {
    private struct State {
        var running = 0
        var stopped = false
        var idleWaiters: [DispatchSemaphore] = []
        var names: Set<String> = []
        var timers: [any DispatchSourceTimer] = []
    }
    private let state = Mutex(State())

    /// Runs `work` on a global queue unless the store is closing or a task with the same name is running.
    ///
    /// `work` is released only after the task is counted as finished, so a store that `work` keeps
    /// alive and whose last reference goes with it can close (and wait here) without waiting for itself.
    func run(_ name: String, _ work: @escaping @Sendable () -> Void) {
        let accepted = state.withLock { state in
            guard !state.stopped, !state.names.contains(name) else { return false }
            state.running += 1
            state.names.insert(name)
            return true
        }
        guard accepted else { return }
        DispatchQueue.global(qos: .utility).async {
            work()
            self.state.withLock { state in
                state.running -= 1
                state.names.remove(name)
                if state.running == 0 {
                    for waiter in state.idleWaiters { waiter.signal() }
                    state.idleWaiters.removeAll()
                }
            }
        }
    }

    /// Calls `tick` every `interval` until ``stopAndWait()``.
    ///
    /// `tick` should only start work (with ``run(_:_:)``): it runs on a timer queue, and a slow tick
    /// delays the next one rather than overlapping it. The store's `deinit` closes it, which stops
    /// the timer, so a timer never outlives its store.
    func repeatEvery(_ interval: Duration, _ tick: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = interval.components
        let nanoseconds = seconds >= Int64(Int.max / 1_000_000_000) ? Int.max : Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        let period = DispatchTimeInterval.nanoseconds(max(1, nanoseconds))
        // Created, kept and cancelled only under the lock: a dispatch source is not `Sendable`.
        state.withLock { state in
            guard !state.stopped else { return }
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
            // A tenth of the interval of slack lets the system batch wake-ups; the exact moment does not matter.
            timer.schedule(deadline: .now() + period, repeating: period, leeway: .nanoseconds(max(1, nanoseconds / 10)))
            timer.setEventHandler(handler: tick)
            timer.resume()
            state.timers.append(timer)
        }
    }

    /// Accepts no more work, cancels the timers, and waits for what is running.
    func stopAndWait() {
        state.withLock { state in
            state.stopped = true
            // A tick already running may still call `run`, which refuses now that `stopped` is set.
            for timer in state.timers { timer.cancel() }
            state.timers.removeAll()
        }
        waitUntilIdle()
    }

    /// Waits until no task is running (tasks started meanwhile included). Blocks its thread: call
    /// it from a thread of the caller's own, never from the cooperative pool.
    func waitUntilIdle() {
        let waiter: DispatchSemaphore? = state.withLock { state in
            guard state.running > 0 else { return nil }
            let semaphore = DispatchSemaphore(value: 0)
            state.idleWaiters.append(semaphore)
            return semaphore
        }
        waiter?.wait()
    }
}
