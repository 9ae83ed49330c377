// Owns: delivering each persister's changes to its observers exactly once, in commit order.
//
// Every write, undo and redo commits a head whose change count is one more than the last one's
// (the store runs transactions one at a time), so in one process the committed changes of a
// store and name are numbered 1, 2, 3, ... All persisters opened on one `Store` object and name
// share one `SharedState`, so a change is delivered once its predecessors have been; a writer
// whose commit failed leaves no gap, because the next commit takes the same number. Should a
// number never come (another instance of a cluster store took it), whatever is held back is
// delivered as soon as no write of this process is in flight.
import ContentStore
import Foundation
import Synchronization

final class SharedState: Sendable {
    private struct State {
        var observers: [UInt64: AsyncStream<PersistChange>.Continuation] = [:]
        var nextObserver: UInt64 = 0
        var inFlight = 0
        var delivered: UInt64
        var held: [UInt64: PersistChange] = [:]
    }

    private let state: Mutex<State>

    private init(delivered: UInt64) {
        state = Mutex(State(delivered: delivered))
    }

    /// A new stream of this persister's changes, from now on.
    func changes() -> AsyncStream<PersistChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: PersistChange.self, bufferingPolicy: .unbounded)
        let id = state.withLock { state in
            defer { state.nextObserver += 1 }
            state.observers[state.nextObserver] = continuation
            return state.nextObserver
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    /// What a write, undo or redo returns from its store transaction: its result, and the change
    /// to deliver (numbered by its change count) when it changed something.
    struct Committed<T> {
        var result: T
        var change: (number: UInt64, change: PersistChange)?

        init(result: T) {
            self.result = result
        }

        init(result: T, change: PersistChange, number: UInt64) {
            self.result = result
            self.change = (number, change)
        }
    }

    /// Runs a commit, then delivers what it changed in order.
    func committing<T>(_ commit: () throws -> Committed<T>) throws -> T {
        begin()
        return try end(Result { try commit() })
    }

    /// ``committing(_:)-(()->Committed<T>)`` for an async commit.
    func committing<T>(_ commit: () async throws -> Committed<T>) async throws -> T {
        begin()
        let committed: Result<Committed<T>, any Error>
        do {
            committed = .success(try await commit())
        } catch {
            committed = .failure(error)
        }
        return try end(committed)
    }

    private func end<T>(_ committed: Result<Committed<T>, any Error>) throws -> T {
        finish((try? committed.get())?.change)
        return try committed.get().result
    }

    private func begin() {
        state.withLock { $0.inFlight += 1 }
    }

    private func finish(_ change: (number: UInt64, change: PersistChange)?) {
        state.withLock { state in
            state.inFlight -= 1
            if let change { state.held[change.number] = change.change }
            while let next = state.held.removeValue(forKey: state.delivered + 1) {
                state.delivered += 1
                for observer in state.observers.values { observer.yield(next) }
            }
            guard state.inFlight == 0, !state.held.isEmpty else { return }
            for number in state.held.keys.sorted() {
                for observer in state.observers.values { observer.yield(state.held[number]!) }
                state.delivered = number
            }
            state.held = [:]
        }
    }

    /// Ends every stream: the last persister using this state is gone.
    private func finishObservers() {
        let observers = state.withLock { state in
            defer { state.observers = [:] }
            return state.observers.values
        }
        for observer in observers { observer.finish() }
    }

    // MARK: The registry

    fileprivate struct Key: Hashable {
        let store: ObjectIdentifier
        let name: String
    }

    private struct Entry {
        let state: SharedState
        var users: Int
    }

    private static let registry = Mutex<[Key: Entry]>([:])

    /// A persister's use of the shared state; the entry goes when the last lease does. A lease
    /// holds its store, so the store's `ObjectIdentifier` is not reused while the entry exists.
    final class Lease: Sendable {
        let state: SharedState
        private let key: Key
        private let store: Store

        fileprivate init(state: SharedState, key: Key, store: Store) {
            self.state = state
            self.key = key
            self.store = store
        }

        deinit { SharedState.release(key) }
    }

    /// The state shared by every persister on `store` named `name`; `delivered` reads the change
    /// count committed so far, for the first of them.
    static func acquire(store: Store, name: String, delivered: () throws -> UInt64) throws -> Lease {
        let key = Key(store: ObjectIdentifier(store), name: name)
        return try registry.withLock { registry in
            if var entry = registry[key] {
                entry.users += 1
                registry[key] = entry
                return Lease(state: entry.state, key: key, store: store)
            }
            let state = SharedState(delivered: try delivered())
            registry[key] = Entry(state: state, users: 1)
            return Lease(state: state, key: key, store: store)
        }
    }

    private static func release(_ key: Key) {
        registry.withLock { registry in
            guard var entry = registry[key] else { return }
            entry.users -= 1
            registry[key] = entry.users > 0 ? entry : nil
            if entry.users == 0 { entry.state.finishObservers() }
        }
    }
}

extension SharedState.Committed: Sendable where T: Sendable {}
