import Foundation
import Synchronization
import Testing
import TestThreads
@testable import Warehouse

/// Observers and the `events` stream.
@Suite(.blocking) struct ObserverTests {
    @Test func observerHearsEverySuccessfulChange() throws {
        let fixture = try Fixture()
        let observer = RecordingObserver()
        fixture.storage.addObserver(observer)
        let id = try fixture.storage.createProject()
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        let copy = try fixture.storage.duplicateProject(id)
        try fixture.storage.deleteProject(id)
        #expect(observer.events == [.created(id), .updated(id), .duplicated(source: id, destination: copy), .deleted(id)])
    }

    @Test func observerHearsNothingOfFailuresDatesAssetsAndFetches() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let observer = RecordingObserver()
        fixture.storage.addObserver(observer)
        try fixture.storage.setCreationDate(Date(), ofProject: id)
        try fixture.storage.setModificationDate(Date(), ofProject: id)
        try fixture.storage.setAsset(Data([1]), named: "a", inProject: id)
        try fixture.storage.removeAsset(named: "a", fromProject: id)
        _ = try fixture.storage.fetchSnapshot(ofProject: id, options: .all)
        _ = try fixture.storage.projectIDs(sortedBy: .creationDate, descending: true)
        _ = try fixture.storage.sizeOfProject(id)
        var bad = ProjectUpdateRequest(projectID: id)
        bad.stepCursor = 1
        _ = try? fixture.storage.update(bad)
        _ = try? fixture.storage.update(ProjectUpdateRequest(projectID: UUID()))
        _ = try? fixture.storage.deleteProject(UUID())
        _ = try? fixture.storage.duplicateProject(UUID())
        #expect(observer.events.isEmpty)
    }

    @Test func notCalledAfterRemoval() throws {
        let fixture = try Fixture()
        let observer = RecordingObserver()
        fixture.storage.addObserver(observer)
        let id = try fixture.storage.createProject()
        fixture.storage.removeObserver(observer)
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        try fixture.storage.deleteProject(id)
        #expect(observer.events == [.created(id)])
        // Removing twice, or an observer never added, is harmless.
        fixture.storage.removeObserver(observer)
        fixture.storage.removeObserver(RecordingObserver())
    }

    @Test func twoObserversAreBothCalled() throws {
        let fixture = try Fixture()
        let first = RecordingObserver()
        let second = RecordingObserver()
        fixture.storage.addObserver(first)
        fixture.storage.addObserver(second)
        fixture.storage.addObserver(first)          // a second add is no second subscription
        let id = try fixture.storage.createProject()
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        #expect(first.events == [.created(id), .updated(id)])
        #expect(second.events == [.created(id), .updated(id)])
    }

    @Test func observersAreHeldWeakly() throws {
        let fixture = try Fixture()
        weak var weakObserver: RecordingObserver?
        do {
            let observer = RecordingObserver()
            weakObserver = observer
            fixture.storage.addObserver(observer)
        }
        #expect(weakObserver == nil)
        _ = try fixture.storage.createProject()   // and a dead observer is simply skipped
    }

    /// Observers run synchronously, after the change is durable and visible: they can read it.
    @Test func observerSeesTheCommittedChangeSynchronously() throws {
        final class Reader: ProjectStorageObserver {
            let seen = Mutex<[Int]>([])
            func storage(_ storage: ProjectStorage, updatedProjectWithID id: UUID) {
                let cursor = (try? storage.fetchSnapshot(ofProject: id).stepCursor) ?? -1
                seen.withLock { $0.append(cursor) }
            }
        }
        let fixture = try Fixture()
        let reader = Reader()
        fixture.storage.addObserver(reader)
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        #expect(reader.seen.withLock { $0 } == [1, 2])
    }

    @Test func eventsStreamGetsTheSameEvents() async throws {
        let fixture = try Fixture()
        let stream = fixture.storage.events
        let id = try fixture.storage.createProject()
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        let copy = try fixture.storage.duplicateProject(id)
        try fixture.storage.deleteProject(copy)
        var iterator = stream.makeAsyncIterator()
        var received: [ProjectStorageEvent] = []
        for _ in 0 ..< 4 { received.append(try #require(await iterator.next())) }
        #expect(received == [.created(id), .updated(id), .duplicated(source: id, destination: copy), .deleted(copy)])
    }

    @Test func eachStreamStartsFromItsCreation() async throws {
        let fixture = try Fixture()
        let early = fixture.storage.events
        let first = try fixture.storage.createProject()
        let late = fixture.storage.events
        let second = try fixture.storage.createProject()
        var earlyIterator = early.makeAsyncIterator()
        var lateIterator = late.makeAsyncIterator()
        #expect(await earlyIterator.next() == .created(first))
        #expect(await earlyIterator.next() == .created(second))
        #expect(await lateIterator.next() == .created(second))
    }

    @Test func streamsFinishWhenTheStorageGoesAway() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(at: directory.store)
        var storage: ProjectStorage? = ProjectStorage(store: store, bundleID: "b")
        let stream = storage!.events
        _ = try storage!.createProject()
        storage = nil
        var count = 0
        for await _ in stream { count += 1 }
        #expect(count == 1)
    }
}
