import Synchronization

/// Hands every value sent to every stream subscribed at that moment, in order.
///
/// Streams buffer what their reader has not taken yet (newest kept, up to `bufferLimit`), so a slow
/// reader never blocks a sender.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var next = 0
        var subscribers: [Int: AsyncStream<Value>.Continuation] = [:]
    }
    private let state = Mutex(State())
    private let bufferLimit: Int

    init(bufferLimit: Int = 1024) { self.bufferLimit = bufferLimit }

    /// A new stream of the values sent from now on; it ends when ``finish()`` is called or the reader goes away.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.subscribers[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ value: Value) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(value) }
    }

    /// Ends the streams subscribed so far (a server stopping ends its event streams; a restart
    /// takes new subscribers).
    func finish() {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
