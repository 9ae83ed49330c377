import Foundation
import Synchronization

/// One consistent state of the store's records, and the blobs they reference.
///
/// While a snapshot exists, collection keeps every blob that was referenced when it was taken, so
/// ``get(_:)`` of a digest one of its records references succeeds even if a newer commit dropped it.
public struct Snapshot: Sendable {
    private let records: any RecordView
    private let engine: any StoreEngine
    private let limits: Store.Limits
    /// What keeps the blobs the snapshot may read from collection while any copy of it exists; nil
    /// for the unregistered view of ``Store/readLatest(_:)``.
    private let pin: (any AnyObject & Sendable)?

    /// A snapshot of `records`, whose blobs `engine` reads, kept by `pin` (an engine's).
    package init(records: any RecordView, engine: any StoreEngine, limits: Store.Limits, pin: (any AnyObject & Sendable)?) {
        self.records = records
        self.engine = engine
        self.limits = limits
        self.pin = pin
    }

    /// The record under `key` in this snapshot.
    public func record(forKey key: String) throws -> Record? {
        try Store.validate(key: key, limits: limits)
        return try records.record(forKey: key)
    }

    /// Keys starting with `prefix` in this snapshot, ascending.
    public func keys(withPrefix prefix: String) throws -> [String] {
        try records.keys(withPrefix: prefix)
    }

    /// The bytes of a blob, verified like ``Store/get(_:)``.
    public func get(_ digest: Digest) throws -> Data {
        try engine.get(digest)
    }
}

/// The snapshots alive now, so collection can spare what they may still read.
final class SnapshotRegistry: Sendable {
    private struct State {
        var next: UInt64 = 0
        var live: [UInt64: UInt32] = [:]
    }
    private let state = Mutex(State())

    /// Unregisters its snapshot when the last copy of the snapshot goes away.
    final class Pin: Sendable {
        private let token: UInt64
        private let registry: SnapshotRegistry
        fileprivate init(token: UInt64, registry: SnapshotRegistry) {
            self.token = token
            self.registry = registry
        }
        deinit { registry.state.withLock { _ = $0.live.removeValue(forKey: token) } }
    }

    func pin(at seconds: UInt32) -> Pin {
        let token = state.withLock { state in
            defer { state.next += 1 }
            state.live[state.next] = seconds
            return state.next
        }
        return Pin(token: token, registry: self)
    }

    /// The time of the oldest live snapshot. A blob unreferenced since before it (strictly) cannot
    /// be referenced by any live snapshot.
    var oldest: UInt32? { state.withLock { $0.live.values.min() } }
}
