import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// Create, list, fetch, delete, dates, bundle IDs and opening by base URL.
@Suite(.blocking) struct ProjectTests {
    @Test func newProjectIsEmpty() throws {
        let clock = TestClock()
        let fixture = try Fixture(clock: clock)
        let id = try fixture.storage.createProject()
        let snapshot = try fixture.storage.fetchSnapshot(ofProject: id, options: .all)
        #expect(snapshot.id == id)
        #expect(snapshot.bundleID == Fixture.bundleID)
        #expect(snapshot.stepIDs == [])
        #expect(snapshot.stepCursor == 0)
        #expect(snapshot.userData == Data())
        #expect(snapshot.creationDate == clock.now)
        #expect(snapshot.modificationDate == clock.now)
        #expect(!snapshot.canUndo)
        #expect(!snapshot.canRedo)
        #expect(try fixture.storage.assetNames(inProject: id) == [])
        #expect(try fixture.storage.sizeOfProject(id) == 0)
    }

    @Test(arguments: [
        (ProjectFetchOptions(), false, false),
        (.stepIDs, true, false),
        (.userData, false, true),
        (.all, true, true),
    ])
    func fetchOptions(options: ProjectFetchOptions, stepIDs: Bool, userData: Bool) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        var request = ProjectUpdateRequest(projectID: id)
        request.userData = Data("project data".utf8)
        try fixture.storage.update(request)

        let snapshot = try fixture.storage.fetchSnapshot(ofProject: id, options: options)
        #expect(snapshot.id == id)
        #expect(snapshot.bundleID == Fixture.bundleID)
        #expect(snapshot.stepCursor == 2)
        #expect((snapshot.stepIDs != nil) == stepIDs)
        #expect(snapshot.stepIDs.map(\.count) == (stepIDs ? 2 : nil))
        #expect(snapshot.userData == (userData ? Data("project data".utf8) : nil))
        #expect(snapshot.canUndo)
        #expect(!snapshot.canRedo)
    }

    @Test func defaultFetchOptionsAreEmpty() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let snapshot = try fixture.storage.fetchSnapshot(ofProject: id)
        #expect(snapshot.stepIDs == nil)
        #expect(snapshot.userData == nil)
    }

    @Test func fetchUnknownProject() throws {
        let fixture = try Fixture()
        let unknown = UUID()
        let error = expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchSnapshot(ofProject: unknown, options: .all) }
        #expect(error?.projectID == unknown)
        #expect(error?.storeCode == .notFound)
    }

    @Test func listsEveryProjectAndNothingElse() throws {
        let fixture = try Fixture()
        #expect(try fixture.storage.projectIDs(sortedBy: .creationDate, descending: true) == [])
        let ids = try (0 ..< 5).map { _ in try fixture.storage.createProject() }
        try fixture.addSteps(2, to: ids[0])
        try fixture.storage.setAsset(Data([1]), named: "a", inProject: ids[1])
        let listed = try fixture.storage.projectIDs(sortedBy: .creationDate, descending: true)
        #expect(listed.count == 5)
        #expect(Set(listed) == Set(ids))
        // Records of other facades sharing the store are not projects.
        try fixture.store.write { try $0.setRecord(Record(value: Data([0])), forKey: "archive/x") }
        #expect(try fixture.storage.projectIDs(sortedBy: .modificationDate, descending: false).count == 5)
    }

    @Test(arguments: [ProjectSortProperty.creationDate, .modificationDate], [false, true])
    func listOrder(property: ProjectSortProperty, descending: Bool) throws {
        let fixture = try Fixture()
        let ids = try (0 ..< 5).map { _ in try fixture.storage.createProject() }
        // Dates opposite to the creation order, so the order cannot come from anything else.
        for (index, id) in ids.enumerated() {
            let date = Date(timeIntervalSince1970: TimeInterval(1000 - index))
            switch property {
            case .creationDate: try fixture.storage.setCreationDate(date, ofProject: id)
            case .modificationDate: try fixture.storage.setModificationDate(date, ofProject: id)
            }
        }
        let oldestFirst = Array(ids.reversed())
        let listed = try fixture.storage.projectIDs(sortedBy: property, descending: descending)
        #expect(listed == (descending ? ids : oldestFirst))
    }

    @Test func listOrderFollowsUpdates() throws {
        let clock = TestClock()
        let fixture = try Fixture(clock: clock)
        let first = try fixture.storage.createProject()
        clock.advance(by: 10)
        let second = try fixture.storage.createProject()
        clock.advance(by: 10)
        try fixture.storage.update(ProjectUpdateRequest(projectID: first))
        #expect(try fixture.storage.projectIDs(sortedBy: .creationDate, descending: false) == [first, second])
        #expect(try fixture.storage.projectIDs(sortedBy: .modificationDate, descending: false) == [second, first])
        #expect(try fixture.storage.projectIDs(sortedBy: .modificationDate, descending: true) == [first, second])
    }

    @Test func setDates() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let created = Date(timeIntervalSince1970: 12345.678)
        let modified = Date(timeIntervalSinceReferenceDate: 0.1)
        try fixture.storage.setCreationDate(created, ofProject: id)
        try fixture.storage.setModificationDate(modified, ofProject: id)
        let snapshot = try fixture.storage.fetchSnapshot(ofProject: id)
        #expect(snapshot.creationDate == created)
        #expect(snapshot.modificationDate == modified)

        let unknown = UUID()
        #expect(expectWarehouseError("writeFailed") { try fixture.storage.setCreationDate(created, ofProject: unknown) }?.projectID == unknown)
        #expect(expectWarehouseError("writeFailed") { try fixture.storage.setModificationDate(created, ofProject: unknown) }?.storeCode == .notFound)
        #expect(try fixture.storage.projectIDs(sortedBy: .creationDate, descending: false) == [id])
    }

    @Test func datesSurviveReopen() throws {
        let directory = TemporaryDirectory()
        let id: UUID
        let date = Date(timeIntervalSince1970: 1_234_567_890.123_456)
        do {
            let store = try Store(at: directory.store)
            let storage = ProjectStorage(store: store, bundleID: "a")
            id = try storage.createProject()
            try storage.setCreationDate(date, ofProject: id)
            try store.close()
        }
        let store = try Store(at: directory.store)
        let snapshot = try ProjectStorage(store: store, bundleID: "b").fetchSnapshot(ofProject: id, options: .all)
        #expect(snapshot.creationDate == date)
        #expect(snapshot.bundleID == "a")
    }

    @Test func anotherBundleIDReadsAndKeepsTheOriginal() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let other = fixture.storage(bundleID: "com.example.other")
        #expect(other.bundleID == "com.example.other")
        #expect(try other.fetchSnapshot(ofProject: id).bundleID == Fixture.bundleID)
        // Listing is global to the store, whatever the bundle ID.
        #expect(try other.projectIDs(sortedBy: .creationDate, descending: true) == [id])

        // Updating and duplicating through the other storage keep the project's bundle ID.
        let snapshot = try other.fetchSnapshot(ofProject: id, options: .all)
        try other.update(#require(ProjectUpdateRequest.addStep(snapshot, content: StepContent(userData: Data([1])))))
        #expect(try other.fetchSnapshot(ofProject: id).bundleID == Fixture.bundleID)
        let copy = try other.duplicateProject(id)
        #expect(try fixture.storage.fetchSnapshot(ofProject: copy).bundleID == Fixture.bundleID)

        // Projects the other storage creates carry its own bundle ID.
        let its = try other.createProject()
        #expect(try fixture.storage.fetchSnapshot(ofProject: its).bundleID == "com.example.other")
    }

    @Test func delete() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let kept = try fixture.storage.createProject()
        try fixture.addSteps(3, to: id)
        try fixture.storage.setAsset(Data([1, 2]), named: "a", inProject: id)
        try fixture.storage.deleteProject(id)
        #expect(try fixture.storage.projectIDs(sortedBy: .creationDate, descending: false) == [kept])
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchSnapshot(ofProject: id) }
        // No record of the project is left behind.
        #expect(try fixture.store.keys(withPrefix: "warehouse/").allSatisfy { !$0.contains(id.uuidString) })
    }

    @Test func deleteUnknownProject() throws {
        let fixture = try Fixture()
        let unknown = UUID()
        let error = expectWarehouseError("deleteFailed") { try fixture.storage.deleteProject(unknown) }
        #expect(error?.projectID == unknown)
        #expect(error?.storeCode == .notFound)
        // A second delete of a deleted project fails the same way.
        let id = try fixture.storage.createProject()
        try fixture.storage.deleteProject(id)
        expectWarehouseError("deleteFailed") { try fixture.storage.deleteProject(id) }
    }

    @Test func fetchStep() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(2, to: id)
        let step = try fixture.storage.fetchStep(steps[1], fromProject: id)
        #expect(step == Step(id: steps[1], projectID: id, userData: Data("step 1".utf8), assetNames: []))

        let unknownStep = UUID()
        let error = expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(unknownStep, fromProject: id) }
        #expect(error?.projectID == id)
        #expect(error?.stepID == unknownStep)
        #expect(error?.storeCode == .notFound)

        let unknownProject = UUID()
        let other = expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(steps[0], fromProject: unknownProject) }
        #expect(other?.projectID == unknownProject)
        #expect(other?.stepID == steps[0])

        // A step of another project is not a step of this one.
        let another = try fixture.storage.createProject()
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(steps[0], fromProject: another) }
    }

    @Test func baseURLStorageSharesOneStoreAndReopens() throws {
        let directory = TemporaryDirectory()
        let base = directory.url.appendingPathComponent("base", isDirectory: true)
        let id: UUID
        do {
            let first = try ProjectStorage(baseURL: base, bundleID: "a")
            let second = try ProjectStorage(baseURL: base, bundleID: "b")
            #expect(first.store === second.store)
            id = try first.createProject()
            #expect(try second.projectIDs(sortedBy: .creationDate, descending: true) == [id])
            #expect(try second.fetchSnapshot(ofProject: id).bundleID == "a")
            #expect(FileManager.default.fileExists(atPath: ProjectStorage.storeDirectory(in: base).appendingPathComponent("FORMAT").path))
        }
        // Both are gone, so the store was closed; it opens again (here, directly).
        let store = try Store(at: ProjectStorage.storeDirectory(in: base))
        #expect(try ProjectStorage(store: store, bundleID: "c").projectIDs(sortedBy: .creationDate, descending: false) == [id])
        try store.close()
        let again = try ProjectStorage(baseURL: base, bundleID: "a")
        #expect(try again.fetchSnapshot(ofProject: id).bundleID == "a")
    }

    @Test func baseURLThatCannotHoldAStore() throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("file")
        try Data("not a directory".utf8).write(to: file)
        let error = expectWarehouseError("writeFailed") { _ = try ProjectStorage(baseURL: file, bundleID: "a") }
        #expect(error?.projectID == nil)
        expectWarehouseError("writeFailed") { _ = try ProjectStorage(baseURL: URL(string: "https://example.com/x")!, bundleID: "a") }
    }
}
