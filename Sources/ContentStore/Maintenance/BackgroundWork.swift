import Dispatch
import Synchronization

/// Maintenance that runs beside the caller (automatic checkpoints), which ``Store/close()`` waits for.
final class BackgroundWork: Sendable {
    private struct State {
        var running = 0
        var stopped = false
        var idleWaiters: [DispatchSemaphore] = []
        var names: Set<String> = []
    }
    private let state = Mutex(State())

    /// Runs `work` on a global queue unless the store is closing or a task with the same name is running.
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

    /// Accepts no more work and waits for what is running.
    func stopAndWait() {
        let waiter: DispatchSemaphore? = state.withLock { state in
            state.stopped = true
            guard state.running > 0 else { return nil }
            let semaphore = DispatchSemaphore(value: 0)
            state.idleWaiters.append(semaphore)
            return semaphore
        }
        waiter?.wait()
    }
}
