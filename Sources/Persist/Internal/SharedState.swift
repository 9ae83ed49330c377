// Owns: delivering each persister's changes to its observers exactly once, in commit order.
//
// Every write, undo and redo commits a head whose change count is one more than the last one's
// (the store runs transactions one at a time), so in one process the committed changes of a
// store and name are numbered 1, 2, 3, ... All persisters opened on one `Store` object and name
// share one `SharedState` (ContentStore's `SharedObjects`), so a change is delivered once its predecessors have been; a writer
// whose commit failed leaves no gap, because the next commit takes the same number. Should a
// number never come (another instance of a cluster store took it), whatever is held back is
// delivered as soon as no write of this process is in flight.
import ContentStore
import Foundation
import Synchronization

final class SharedState: Sendable {
    private struct State {
        var inFlight = 0
        var delivered: UInt64
        var held: [UInt64: PendingChange] = [:]
    }

    private let state: Mutex<State>
    /// The head the last commit of this process wrote, so the next write (which usually builds on
    /// that commit) takes it from here instead of walking the record tree for it.
    private let lastHead = Mutex<KnownHead?>(nil)
    /// Every change, to every stream: unbounded, so no reader misses one.
    private let changeStreams = Broadcast<PersistChange>()
    /// Held so that its `ObjectIdentifier`, in ``key``, is not reused while this state lives.
    private let store: Store
    private let key: SharedObjects.Key

    private init(store: Store, key: SharedObjects.Key, delivered: UInt64) {
        self.store = store
        self.key = key
        state = Mutex(State(delivered: delivered))
    }

    /// Ends every stream and frees the registry's slot: the last persister using this state is gone.
    deinit {
        changeStreams.finish()
        SharedObjects.release(key)
    }

    /// The state shared by every persister on `store` named `name`; `delivered` reads the change
    /// count committed so far, for the first of them.
    static func shared(store: Store, name: String, delivered: () throws -> UInt64) throws -> SharedState {
        let key = SharedObjects.Key(SharedState.self, store: store, name: name)
        return try SharedObjects.object(for: key) { SharedState(store: store, key: key, delivered: try delivered()) }
    }

    /// A new stream of this persister's changes, from now on.
    func changes() -> AsyncStream<PersistChange> {
        changeStreams.subscribe()
    }

    /// A change as its commit knows it. The entities it touched (a parse of every changed key)
    /// are worked out only when a stream is there to take it: most writes have no reader.
    struct PendingChange: Sendable {
        var step: UndoStep
        var kind: PersistChange.Kind
        var diff: Diff
        var layout: Layout

        /// The change as a stream receives it.
        func change() -> PersistChange {
            PersistChange(step: step, kind: kind, changed: layout.changedEntities(in: diff))
        }
    }

    /// A head as the store held it after commit `afterCommit`: taken by a transaction over that
    /// commit's state, or a later one when the store remembers that no commit since changed the head
    /// (another writer's write, undo or prune does).
    struct KnownHead: Sendable {
        var afterCommit: UInt64
        var head: Head
        var record: Record
    }

    /// The head the last commit wrote, if this process knows it.
    var knownHead: KnownHead? { lastHead.withLock { $0 } }

    /// What a write, undo or redo returns from its store transaction: its result, and the change
    /// to deliver (numbered by its change count) when it changed something, with the head it wrote.
    struct Committed<T> {
        // First, so that its offset is fixed: the non-generic delivery reads it without `T`'s metadata.
        var delivery = Delivery()
        var result: T

        init(result: T) {
            self.result = result
        }

        /// `head` was written in the transaction over `transaction`'s base: the commit after it.
        init(result: T, change: PendingChange, head: Head, in transaction: Transaction) {
            self.result = result
            delivery = Delivery(change: (head.changeCount, change),
                                head: transaction.baseSequence.map { KnownHead(afterCommit: $0 + 1, head: head, record: head.record) })
        }
    }

    /// The part of ``Committed`` that is not the result: what ``deliver(_:)`` takes.
    struct Delivery {
        var change: (number: UInt64, change: PendingChange)?
        var head: KnownHead?
    }

    /// Runs a commit, then delivers what it changed in order.
    func committing<T>(_ commit: () throws -> Committed<T>) throws -> T {
        begin()
        let committed: Committed<T>
        do {
            committed = try commit()
        } catch {
            finish(nil)
            throw error
        }
        deliver(committed.delivery)
        return committed.result
    }

    /// ``committing(_:)-(()->Committed<T>)`` for an async commit.
    func committing<T>(_ commit: () async throws -> Committed<T>) async throws -> T {
        begin()
        let committed: Committed<T>
        do {
            committed = try await commit()
        } catch {
            finish(nil)
            throw error
        }
        deliver(committed.delivery)
        return committed.result
    }

    /// Not generic, unlike its callers: generic code here looked up `Committed<T>`'s metadata and
    /// copied the whole value on every write.
    private func deliver(_ delivery: borrowing Delivery) {
        if let head = delivery.head {
            // Of two writers ending out of order, the later commit's head is the one still current.
            lastHead.withLock { if ($0?.afterCommit ?? 0) < head.afterCommit { $0 = head } }
        }
        finish(delivery.change)
    }

    private func begin() {
        state.withLock { $0.inFlight += 1 }
    }

    private func finish(_ change: (number: UInt64, change: PendingChange)?) {
        state.withLock { state in
            state.inFlight -= 1
            if let (number, change) = change {
                // The next in order, as nearly every change is: delivered without a pass through `held`.
                if number == state.delivered + 1 {
                    state.delivered = number
                    changeStreams.send { change.change() }
                } else {
                    state.held[number] = change
                }
            }
            while !state.held.isEmpty, let next = state.held.removeValue(forKey: state.delivered + 1) {
                state.delivered += 1
                changeStreams.send { next.change() }
            }
            guard state.inFlight == 0, !state.held.isEmpty else { return }
            for (number, change) in state.held.sorted(by: { $0.key < $1.key }) {
                changeStreams.send { change.change() }
                state.delivered = number
            }
            state.held = [:]
        }
    }
}

extension SharedState.Committed: Sendable where T: Sendable {}
