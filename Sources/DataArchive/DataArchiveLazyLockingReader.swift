import ContentStore
import Foundation
import Synchronization

/// Reads one key's versions one at a time — the current value, then the archives newest →
/// oldest — from the snapshot taken when it was created (see
/// ``DataArchive/lazyLockingReader(key:completionHandler:)``).
///
/// Despite the original name nothing is locked: writers to the key proceed while the reader
/// lives. The snapshot keeps the versions it has yet to read from being collected; it is released
/// when the last version has been read, or at ``finish()``. After the last version, `getNext`
/// reports `(nil, .lockingReaderWasFinished)` and the reader is finished — also for a key with no
/// archives. `getNext` calls are served in the order they are made, on a background thread.
public final class DataArchiveLazyLockingReader: Sendable {
    private struct State {
        var snapshot: Snapshot?
        var next = 0
        var isFinished = false
    }

    private enum Step: Sendable {
        case read(Snapshot, Digest, position: Int)
        case finished
    }

    private let engine: ArchiveEngine
    private let key: String
    private let versions: [Digest]
    private let lane = Lane.newReader()
    private let state: Mutex<State>

    init(engine: ArchiveEngine, key: String, snapshot: Snapshot, versions: [Digest]) {
        self.engine = engine
        self.key = key
        self.versions = versions
        state = Mutex(State(snapshot: snapshot))
    }

    /// Advances: the next version to read, or the end (which finishes the reader).
    private func advance() -> Step {
        state.withLock { state in
            guard !state.isFinished, let snapshot = state.snapshot, state.next < versions.count else {
                state.isFinished = true
                state.snapshot = nil
                return .finished
            }
            let position = state.next
            state.next += 1
            // The last read holds its own copy of the snapshot; nothing after it needs the pin.
            if state.next == versions.count { state.snapshot = nil }
            return .read(snapshot, versions[position], position: position)
        }
    }

    /// Reads the next version: `(data, .success)`; after the oldest, `(nil, .lockingReaderWasFinished)`;
    /// `(nil, .storeFailure)` if the version cannot be read (the reader moves on past it).
    public func getNext(completionHandler: @escaping @Sendable (Data?, DataArchiveResult) -> Void) {
        engine.perform(on: lane, { _ -> (Data?, DataArchiveResult) in
            switch self.advance() {
            case .finished:
                return (nil, .lockingReaderWasFinished)
            case .read(let snapshot, let digest, _):
                do {
                    return (try snapshot.get(digest), .success)
                } catch {
                    return (nil, .storeFailure(error))
                }
            }
        }, deliver: completionHandler)
    }

    /// Reads the next version converted by `T`: `(value, .success)`; `(nil, .couldNotConvertFile)`
    /// when `T.from(data:)` returns nil; after the oldest, `(nil, .lockingReaderWasFinished)`.
    public func getNext<T: ValueConverter>(converterType: T.Type, completionHandler: @escaping @Sendable (T.T?, DataArchiveResult) -> Void) {
        let engine = engine
        let key = key
        let total = versions.count
        let typeName = String(describing: T.self)
        let decode = Handover<T>.decoder
        engine.perform(on: lane, { _ -> (Data?, Int, DataArchiveResult) in
            switch self.advance() {
            case .finished:
                return (nil, 0, .lockingReaderWasFinished)
            case .read(let snapshot, let digest, let position):
                do {
                    return (try snapshot.get(digest), position, .success)
                } catch {
                    return (nil, position, .storeFailure(error))
                }
            }
        }, deliver: { data, position, result in
            guard let data else {
                completionHandler(nil, result)
                return
            }
            if let value = decode.value(data) {
                completionHandler(value, .success)
            } else {
                let index = ArchiveEngine.fileIndex(ofPosition: position, total: total)
                completionHandler(nil, .couldNotConvertFile(engine.fileURL(forKey: key, index: index), typeName))
            }
        })
    }

    /// Finishes the reader now and releases its snapshot; later `getNext` calls report
    /// `(nil, .lockingReaderWasFinished)`. A read already under way completes. Idempotent.
    public func finish() {
        state.withLock { state in
            state.isFinished = true
            state.snapshot = nil
        }
    }

    /// Whether the reader is finished: ``finish()`` was called, or `getNext` reported
    /// `lockingReaderWasFinished`.
    public var isFinished: Bool {
        state.withLock { $0.isFinished }
    }
}
