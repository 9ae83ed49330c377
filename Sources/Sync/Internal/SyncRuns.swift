/// Runs syncs one at a time and lets callers share them.
///
/// Invariant owned here: a caller's run starts after the call, so it pushes every change made
/// before the call and pulls after it. A caller joins the run that is queued (not yet started) if
/// there is one — widening its scope to every container when theirs differ — and otherwise queues
/// a new run behind the one in progress.
actor SyncRuns {
    private struct Queued {
        let id: Int
        var container: String??
        let task: Task<SyncReport, any Error>
    }
    private var queued: Queued?
    private var current: Task<SyncReport, any Error>?
    private var nextID = 0

    func run(_ container: String?, _ perform: @escaping @Sendable (String?) async throws -> SyncReport) async throws -> SyncReport {
        if var waiting = queued {
            if waiting.container != .some(container) { waiting.container = .some(nil) }
            queued = waiting
            return try await waiting.task.value
        }
        let id = nextID
        nextID += 1
        let previous = current
        let task = Task {
            _ = await previous?.result
            let scope = self.start(id)
            return try await perform(scope)
        }
        queued = Queued(id: id, container: .some(container), task: task)
        return try await task.value
    }

    /// Moves run `id` from queued to current and returns its final scope.
    private func start(_ id: Int) -> String? {
        guard let waiting = queued, waiting.id == id else { return nil }
        queued = nil
        current = waiting.task
        return waiting.container ?? nil
    }
}
