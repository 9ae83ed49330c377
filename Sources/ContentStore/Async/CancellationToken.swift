import Synchronization

/// Carries a task's cancellation to the blocking work it awaits on the store's own threads
/// (``IOThreadPool``), where `Task.isCancelled` cannot see it.
///
/// Long operations call ``checkCancellation()`` between batches, at points where stopping leaves the
/// store consistent (what earlier batches did is committed; nothing of the next has started). Calls
/// from the blocking API have no token, and the check does nothing.
final class CancellationToken: Sendable {
    /// The token of the async call the current thread is running, if any.
    @TaskLocal static var current: CancellationToken?

    private let cancelled = Atomic<Bool>(false)

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }

    /// Throws `CancellationError` when the async call running on this thread was cancelled.
    static func checkCancellation() throws {
        if let token = current, token.isCancelled { throw CancellationError() }
    }
}
