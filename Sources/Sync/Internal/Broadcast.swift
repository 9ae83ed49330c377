import Synchronization

/// Hands every value sent to every stream subscribed at that moment, in order.
///
/// Streams buffer what their reader has not taken yet (newest kept, up to `bufferLimit`), so a slow
/// reader never blocks a sender.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var next = 0
        var subscribers: [Int: AsyncStream<Value>.Continuation] = [:]
        var isFinished = false
    }
    private let state = Mutex(State())
    private let bufferLimit: Int

    init(bufferLimit: Int = 1024) { self.bufferLimit = bufferLimit }

    /// A new stream of the values sent from now on; it ends when ``finish()`` is called or the reader goes away.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let id: Int? = state.withLock { state in
            guard !state.isFinished else { return nil }
            defer { state.next += 1 }
            state.subscribers[state.next] = continuation
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
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

    /// Ends every stream; later subscribers get a finished stream.
    func finish() {
        let subscribers = state.withLock { state in
            state.isFinished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
