// Owns: every value sent reaches every stream subscribed at that moment, in the order sent.
//
// Values are yielded under the lock, so two senders' values reach all streams in one order: a
// facade that sends in commit order delivers in commit order. A stream's buffering policy is the
// broadcast's (unbounded where a reader must see every change, newest-kept where a slow reader may
// skip), so a slow reader never blocks a sender.
import Synchronization

/// A fan-out of values to `AsyncStream`s: the change streams of the facades.
package final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var next = 0
        var subscribers: [Int: AsyncStream<Value>.Continuation] = [:]
    }

    private let state = Mutex(State())
    /// How many streams there are, kept with ``State/subscribers`` under the lock: a send with no
    /// stream (most of a facade's, which nobody observes) returns on one load, before the lock and
    /// the generic metadata taking it costs from a module that cannot specialize it.
    private let subscriberCount = Atomic(0)
    private let bufferingPolicy: AsyncStream<Value>.Continuation.BufferingPolicy

    /// A broadcast whose streams buffer what their reader has not taken yet by `bufferingPolicy`.
    package init(bufferingPolicy: AsyncStream<Value>.Continuation.BufferingPolicy = .unbounded) {
        self.bufferingPolicy = bufferingPolicy
    }

    /// A new stream of the values sent from now on; it ends when ``finish()`` is called or its
    /// reader goes away.
    package func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: bufferingPolicy)
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.subscribers[state.next] = continuation
            subscriberCount.store(state.subscribers.count, ordering: .releasing)
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            self?.unsubscribe(id)
        }
        return stream
    }

    private func unsubscribe(_ id: Int) {
        state.withLock { state in
            state.subscribers[id] = nil
            subscriberCount.store(state.subscribers.count, ordering: .releasing)
        }
    }

    /// Hands `value` to every current stream.
    package func send(_ value: Value) {
        guard subscriberCount.load(ordering: .acquiring) > 0 else { return }
        state.withLock { state in
            for subscriber in state.subscribers.values { subscriber.yield(value) }
        }
    }

    /// Hands the value `makeValue` makes to every current stream, and makes none when there is
    /// none: for a value that costs work to build, which most sends have no reader for.
    package func send(_ makeValue: () -> Value) {
        guard subscriberCount.load(ordering: .acquiring) > 0 else { return }
        state.withLock { state in
            guard !state.subscribers.isEmpty else { return }
            let value = makeValue()
            for subscriber in state.subscribers.values { subscriber.yield(value) }
        }
    }

    /// Ends the streams subscribed so far; later subscribers get new streams.
    package func finish() {
        // Finished outside the lock: finishing runs `onTermination`, which takes it.
        let subscribers = state.withLock { state in
            defer {
                state.subscribers = [:]
                subscriberCount.store(0, ordering: .releasing)
            }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
