import ContentStore
import Dispatch
import Synchronization

/// One instance's concurrent single-blob puts, stored in groups (Docs/cluster.md §3.1 steps 2–4).
///
/// Owns two invariants:
/// - Grouping: puts that arrive while groups are in flight queue and form the next group, stored
///   by one of them (a leader) with a fixed number of statements whatever the group's size: one
///   freshens the group's packed digests and inserts its inline blobs, and the blobs still missing
///   go into one pack (an intent with its lease, one upload, one registration). At most
///   ``leaderLimit`` groups are in flight at once, so uploads overlap with the next group's hashing
///   and compression while the number of requests stays bounded.
/// - Upload before registration, per member: a member hears `stored` only after the statement that
///   gives its digest a row committed. A failure fails exactly the members it left without a row
///   (an unreachable object store fails the group's packed blobs, not its inline ones), and nothing
///   is half done (each statement is its own transaction).
/// Leadership passes to the first waiter when a leader's group ends, so no put serves others forever.
final class PutGroup: Sendable {
    /// What became of a member.
    enum Outcome: Sendable {
        case stored
        case failed(any Error)
        /// Not an outcome: the member now leads a group.
        case lead
    }

    /// One blob waiting to be stored: its digest and its stored (encoded) form.
    final class Member: Sendable {
        let digest: Digest
        let logicalSize: Int
        let codec: ClusterPackFormat.Codec
        let stored: [UInt8]
        private let outcome = Mutex<[Outcome]>([])
        private let signal = DispatchSemaphore(value: 0)

        init(digest: Digest, logicalSize: Int, codec: ClusterPackFormat.Codec, stored: [UInt8]) {
            self.digest = digest
            self.logicalSize = logicalSize
            self.codec = codec
            self.stored = stored
        }

        func finish(_ outcome: Outcome) {
            self.outcome.withLock { $0.append(outcome) }
            signal.signal()
        }

        func next() -> Outcome {
            signal.wait()
            return outcome.withLock { $0.removeFirst() }
        }
    }

    private struct State {
        var waiting: [Member] = []
        var leaders = 0
    }

    private let state = Mutex(State())
    private let byteLimit: Int
    /// Groups in flight at most: enough to keep an upload going while the next group forms.
    static let leaderLimit = 3
    /// Members in one group at most.
    static let memberLimit = 128

    /// Puts waiting for a leader to take them into a group.
    var queued: Int { state.withLock { $0.waiting.count } }

    /// A group holds up to `byteLimit` stored bytes (the pack size target), and always one member.
    init(byteLimit: Int) {
        self.byteLimit = byteLimit
    }

    /// How a group ended: the members (by digest) left without a row, with why; the others are stored.
    typealias Failures = [Digest: any Error]

    /// Queues `member` and waits until its group stored it (or failed). `store` stores a group; it
    /// throws when no member of it was stored.
    func submit(_ member: Member, store: @Sendable ([Member]) throws -> Failures) throws {
        let leads = state.withLock { state in
            guard state.leaders < Self.leaderLimit else {
                state.waiting.append(member)
                return false
            }
            state.leaders += 1
            return true
        }
        if leads { member.finish(.lead) }
        while true {
            switch member.next() {
            case .lead: lead(first: member, store)
            case .failed(let error): throw error
            case .stored: return
            }
        }
    }

    /// Stores a group that starts with `first` (already out of the queue: no other leader can take
    /// it), then hands the leader's slot to the first waiter, taken out of the queue the same way.
    private func lead(first: Member, _ store: @Sendable ([Member]) throws -> Failures) {
        let group = state.withLock { state in
            var bytes = first.stored.count
            var count = 0
            for member in state.waiting.prefix(Self.memberLimit - 1) {
                if bytes + member.stored.count > byteLimit { break }
                bytes += member.stored.count
                count += 1
            }
            let group = [first] + state.waiting.prefix(count)
            state.waiting.removeFirst(count)
            return group
        }
        let failures: Failures
        do {
            failures = try store(group)
        } catch {
            failures = Dictionary(group.map { ($0.digest, error) }, uniquingKeysWith: { first, _ in first })
        }
        let next = state.withLock { state -> Member? in
            if !state.waiting.isEmpty { return state.waiting.removeFirst() }
            state.leaders -= 1
            return nil
        }
        for member in group { member.finish(failures[member.digest].map(Outcome.failed) ?? .stored) }
        next?.finish(.lead)
    }
}
