import ContentStore
import Foundation
import Synchronization

/// Receives a ``ProjectStorage``'s changes. Methods are called synchronously on the thread that made
/// the change, after the change is durable, and only for successful operations. Every method has an
/// empty default, so implement only what you need.
///
/// The storage holds observers weakly: keep a strong reference for as long as you observe.
public protocol ProjectStorageObserver: AnyObject, Sendable {
    /// `storage` created the project `id`.
    func storage(_ storage: ProjectStorage, createdProjectWithID id: UUID)
    /// `storage` updated the project `id` with ``ProjectStorage/update(_:)``.
    func storage(_ storage: ProjectStorage, updatedProjectWithID id: UUID)
    /// `storage` deleted the project `id`.
    func storage(_ storage: ProjectStorage, deletedProjectWithID id: UUID)
    /// `storage` duplicated the project `id` into the new project `destinationID`.
    func storage(_ storage: ProjectStorage, duplicatedProjectWithID id: UUID, destinationID: UUID)
}

extension ProjectStorageObserver {
    /// Does nothing.
    public func storage(_ storage: ProjectStorage, createdProjectWithID id: UUID) {}
    /// Does nothing.
    public func storage(_ storage: ProjectStorage, updatedProjectWithID id: UUID) {}
    /// Does nothing.
    public func storage(_ storage: ProjectStorage, deletedProjectWithID id: UUID) {}
    /// Does nothing.
    public func storage(_ storage: ProjectStorage, duplicatedProjectWithID id: UUID, destinationID: UUID) {}
}

/// The observers and event streams of one storage.
final class Notifier: Sendable {
    private struct WeakObserver {
        weak var observer: (any ProjectStorageObserver)?
        let identity: ObjectIdentifier
    }

    private let observers = Mutex<[WeakObserver]>([])
    /// Unbounded: a stream's reader sees every event.
    private let streams = Broadcast<ProjectStorageEvent>()

    func add(_ observer: any ProjectStorageObserver) {
        let identity = ObjectIdentifier(observer)
        observers.withLock { list in
            list.removeAll { $0.observer == nil }
            guard !list.contains(where: { $0.identity == identity }) else { return }
            list.append(WeakObserver(observer: observer, identity: identity))
        }
    }

    func remove(_ observer: any ProjectStorageObserver) {
        let identity = ObjectIdentifier(observer)
        observers.withLock { list in
            list.removeAll { $0.identity == identity || $0.observer == nil }
        }
    }

    func makeStream() -> AsyncStream<ProjectStorageEvent> {
        streams.subscribe()
    }

    /// Feeds `event` to every live stream, then calls every live observer, outside the lock (an
    /// observer may call back into the storage).
    func post(_ event: ProjectStorageEvent, from storage: ProjectStorage) {
        streams.send(event)
        let live = observers.withLock { list in
            list.removeAll { $0.observer == nil }
            return list.compactMap(\.observer)
        }
        for observer in live {
            switch event {
            case let .created(id): observer.storage(storage, createdProjectWithID: id)
            case let .updated(id): observer.storage(storage, updatedProjectWithID: id)
            case let .deleted(id): observer.storage(storage, deletedProjectWithID: id)
            case let .duplicated(source, destination):
                observer.storage(storage, duplicatedProjectWithID: source, destinationID: destination)
            }
        }
    }

    /// Ends every stream.
    func finish() {
        streams.finish()
    }
}
