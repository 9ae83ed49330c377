import Foundation

/// Runs blocking store work (a commit waits for its fsync) for async callers on a thread of its
/// own, so the cooperative pool is never blocked. One thread per call: simple, and an update's cost
/// is its fsync, not the thread.
enum BlockingCall {
    /// Runs `work` on a new thread; throws `CancellationError` without running it when the task is
    /// already cancelled.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try work() })
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }
}
