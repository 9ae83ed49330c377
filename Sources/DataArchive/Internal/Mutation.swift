import ContentStore
import Foundation

/// A job on the operations executor: store work in a closure, or a mutation of one key.
///
/// Consecutive mutations in one batch (so of one key, in call order) are committed together: each
/// is prepared in order (key check, `toData`, `put`), then every prepared change is applied to the
/// key's version list inside one `store.write`. The completions run after that commit, so each
/// still reports only once its change is durable; the intermediate states are never visible,
/// because anything that could look at them (a read of the key, a snapshot) is a closure job that
/// ends the run of mutations before it. A failed coalesced commit falls back to one commit per
/// change, so each failure is attributed exactly as if the calls had run one by one.
enum OperationJob: LaneJob {
    case closure(@Sendable () -> Void)
    case mutation(Mutation)

    static func run(_ batch: [OperationJob]) {
        var mutations: [Mutation] = []
        for job in batch {
            switch job {
            case .mutation(let mutation):
                mutations.append(mutation)
            case .closure(let body):
                Mutation.apply(mutations)
                mutations.removeAll()
                body()
            }
        }
        Mutation.apply(mutations)
    }
}

/// A change to one key, queued on its lane.
struct Mutation: Sendable {
    enum Payload: Sendable {
        case data(Data)
        /// A `ValueConverter`'s `toData`, run on the lane when the change is prepared.
        case converted(Handover<() -> Data?>)
    }

    enum Change: Sendable {
        /// Sets the current value; with `archiving`, the old one becomes the newest archive.
        case set(Payload, archiving: Bool)
        case keep(upTo: Int)
        case delete
    }

    enum Outcome: Sendable {
        case success
        case failure(any Error)
        /// `toData` returned nil; nothing changed.
        case unconvertible

        /// Returns on success; throws the failure, or `invalidArgument` for an unconvertible value.
        func get() throws {
            switch self {
            case .success: return
            case .failure(let error): throw error
            case .unconvertible: throw StoreError(code: .invalidArgument, message: "the value could not be converted to data")
            }
        }
    }

    let engine: ArchiveEngine
    let key: String
    let change: Change
    /// Called once, on the worker, after the change committed (or failed).
    let finish: @Sendable (Outcome) -> Void

    /// A prepared change: its blob (if any) is in the store.
    private enum Edit {
        case set(Digest, archiving: Bool)
        case keep(upTo: Int)
        case delete

        func applied(to list: VersionList?) -> VersionList? {
            switch self {
            case .set(let digest, let archiving):
                guard let list else { return VersionList(versions: [digest]) }
                return VersionList(versions: [digest] + list.versions.dropFirst(archiving ? 0 : 1))
            case .keep(let limit):
                guard var list, list.archiveCount > limit else { return list }
                list.versions.removeLast(list.archiveCount - limit)
                return list
            case .delete:
                return nil
            }
        }
    }

    /// Applies one change to `key` on the calling thread, which holds the key's turn, and returns
    /// its outcome. `beforeCommit` runs as the transaction starts; what it throws commits nothing.
    static func apply(
        alone change: Change, key: String, engine: ArchiveEngine, beforeCommit: @escaping @Sendable () throws -> Void
    ) -> Outcome {
        outcomes(of: [Mutation(engine: engine, key: key, change: change) { _ in }], beforeCommit: beforeCommit)[0]
    }

    /// Applies consecutive mutations of one key (one lane, so one key and one engine), then calls
    /// each one's `finish`.
    static func apply(_ mutations: [Mutation]) {
        for (mutation, outcome) in zip(mutations, outcomes(of: mutations)) { mutation.finish(outcome) }
    }

    /// Applies consecutive mutations of one key and returns their outcomes, in order.
    private static func outcomes(of mutations: [Mutation], beforeCommit: @escaping @Sendable () throws -> Void = {}) -> [Outcome] {
        guard let first = mutations.first else { return [] }
        let key = first.key
        let recordKey: String
        let store: Store
        do {
            recordKey = try KeyCoding.recordKey(for: key)
            store = try first.engine.store()
        } catch {
            return mutations.map { _ in .failure(error) }
        }

        var outcomes = [Outcome](repeating: .success, count: mutations.count)
        var prepared: [(index: Int, edit: Edit)] = []
        for (index, mutation) in mutations.enumerated() {
            switch mutation.change {
            case .set(let payload, let archiving):
                let data: Data?
                switch payload {
                case .data(let bytes): data = bytes
                case .converted(let encode): data = encode.value()
                }
                guard let data else {
                    outcomes[index] = .unconvertible
                    continue
                }
                do {
                    prepared.append((index, .set(try store.put(data), archiving: archiving)))
                } catch {
                    outcomes[index] = .failure(error)
                }
            case .keep(let limit):
                prepared.append((index, .keep(upTo: limit)))
            case .delete:
                prepared.append((index, .delete))
            }
        }

        do {
            try commit(prepared.map(\.edit), recordKey: recordKey, key: key, store: store, beforeCommit: beforeCommit)
        } catch {
            if prepared.count == 1 {
                outcomes[prepared[0].index] = .failure(error)
            } else {
                for (index, edit) in prepared {
                    do {
                        try commit([edit], recordKey: recordKey, key: key, store: store, beforeCommit: beforeCommit)
                    } catch {
                        outcomes[index] = .failure(error)
                    }
                }
            }
        }
        return outcomes
    }

    /// One transaction: reads the key's versions, applies `edits` in order, writes the result (or
    /// nothing, when it is unchanged).
    private static func commit(
        _ edits: [Edit], recordKey: String, key: String, store: Store, beforeCommit: @Sendable () throws -> Void
    ) throws {
        guard !edits.isEmpty else { return }
        try store.write { transaction in
            try beforeCommit()
            let original = try transaction.record(forKey: recordKey).map { try VersionList(record: $0, key: key) }
            let updated = edits.reduce(original) { list, edit in edit.applied(to: list) }
            guard updated != original else { return }
            if let updated {
                try transaction.setRecord(updated.record, forKey: recordKey)
            } else {
                try transaction.removeRecord(forKey: recordKey)
            }
        }
    }
}
