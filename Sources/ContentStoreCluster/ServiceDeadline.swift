import Synchronization

/// A deadline on one call to a service (PostgreSQL or the object store) that holds even when the
/// call ignores cancellation.
///
/// Owns one invariant: ``run(within:onTimeout:_:)`` returns no later than its timeout (plus
/// scheduling), whatever `body` does. A task group cannot promise that: it waits for every child
/// before returning, and postgres-nio's `query` does not stop when its task is cancelled, so a
/// query on a connection the server never answers (or a response body that trickles) would hold
/// the caller forever. Here `body` runs in a task of its own that is cancelled and left behind at
/// the deadline; `onTimeout` is where the caller frees what it holds (closing the connection makes
/// the abandoned query fail, which returns the connection to its pool).
enum ServiceDeadline {
    /// The error a call that outlived its deadline throws; callers map it to `unavailable`.
    struct Exceeded: Error, CustomStringConvertible {
        var timeout: Duration
        var description: String { "no answer within \(timeout)" }
    }

    /// A check made once `body` has run for `after` without an answer (ClusterDatabase asks whether
    /// the server takes connections at all). Its error, if it throws first, is the call's.
    struct Check: Sendable {
        var after: Duration
        var run: @Sendable () async throws -> Void
    }

    /// `body`'s result, or ``Exceeded`` once `timeout` has passed (after calling `onTimeout`), or
    /// `check`'s error, or `CancellationError` as soon as the calling task is cancelled.
    ///
    /// Two tasks a call (the work and one timer that also starts the check): every PostgreSQL
    /// statement pays this, so the check shares the timer instead of a task group of its own.
    static func run<T: Sendable>(within timeout: Duration, check: Check? = nil, onTimeout: @escaping @Sendable () -> Void = {},
                                 _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let race = Race<T>()
        let work = Task(executorPreference: ClusterExecutor.shared) {
            do {
                race.finish(.success(try await body()))
            } catch {
                race.finish(.failure(error))
            }
        }
        let timer = Task(executorPreference: ClusterExecutor.shared) {
            var waited = Duration.zero
            if let check, check.after < timeout {
                try? await Task.sleep(for: check.after)
                if Task.isCancelled { return }
                waited = check.after
                // Apart from the timer, which must fire on time however long the check takes.
                Task(executorPreference: ClusterExecutor.shared) {
                    do {
                        try await check.run()
                    } catch {
                        if race.finish(.failure(error)) { work.cancel() }
                    }
                }
            }
            try? await Task.sleep(for: timeout - waited)
            if !Task.isCancelled, race.finish(.failure(Exceeded(timeout: timeout))) {
                work.cancel()
                onTimeout()
            }
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await race.wait()
        } onCancel: {
            if race.finish(.failure(CancellationError())) { work.cancel() }
        }
    }

    /// The first result wins; the waiter is resumed exactly once, whenever it starts waiting.
    private final class Race<T: Sendable>: Sendable {
        private struct State {
            var result: Result<T, any Error>?
            var waiter: CheckedContinuation<T, any Error>?
        }

        private let state = Mutex(State())

        /// Records `result` unless one is recorded already; true when this call won.
        @discardableResult
        func finish(_ result: Result<T, any Error>) -> Bool {
            let (won, waiter) = state.withLock { state -> (Bool, CheckedContinuation<T, any Error>?) in
                guard case .none = state.result else { return (false, nil) }
                state.result = result
                defer { state.waiter = nil }
                return (true, state.waiter)
            }
            waiter?.resume(with: result)
            return won
        }

        func wait() async throws -> T {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<T, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }
}
