import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// `update`: insertion, deletion, cursor, user data, validation and atomicity.
@Suite(.blocking) struct UpdateTests {
    @Test func addStepsInsertsAtTheCursorAndMovesIt() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(3, to: id)
        let snapshot = try fixture.snapshot(id)
        #expect(snapshot.stepIDs == steps)
        #expect(snapshot.stepCursor == 3)
        #expect(Set(steps).count == 3)
        for (index, step) in steps.enumerated() {
            #expect(try fixture.storage.fetchStep(step, fromProject: id).userData == Data("step \(index)".utf8))
        }
    }

    @Test func undoAndRedo() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(3, to: id)
        for expected in [2, 1, 0] {
            try fixture.storage.update(#require(ProjectUpdateRequest.undo(try fixture.snapshot(id))))
            #expect(try fixture.snapshot(id).stepCursor == expected)
        }
        #expect(ProjectUpdateRequest.undo(try fixture.snapshot(id)) == nil)
        for expected in [1, 2, 3] {
            try fixture.storage.update(#require(ProjectUpdateRequest.redo(try fixture.snapshot(id))))
            #expect(try fixture.snapshot(id).stepCursor == expected)
        }
        #expect(ProjectUpdateRequest.redo(try fixture.snapshot(id)) == nil)
        #expect(try fixture.snapshot(id).stepIDs == steps)
    }

    @Test(arguments: [0, 1, 3])
    func addStepAfterUndoDiscardsTheRedoSteps(cursor: Int) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(3, to: id)
        var request = ProjectUpdateRequest(projectID: id)
        request.stepCursor = cursor
        try fixture.storage.update(request)

        let content = StepContent(userData: Data("new".utf8), assets: ["x": Data([9])])
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: content)))
        let after = try fixture.snapshot(id)
        let stepIDs = try #require(after.stepIDs)
        #expect(stepIDs.count == cursor + 1)
        #expect(Array(stepIDs.prefix(cursor)) == Array(steps.prefix(cursor)))
        #expect(!steps.contains(stepIDs[cursor]))
        #expect(after.stepCursor == cursor + 1)
        #expect(!after.canRedo)
        #expect(try fixture.storage.fetchStep(stepIDs[cursor], fromProject: id).assetNames == ["x"])
        // The discarded steps are gone, records and all.
        for discarded in steps[cursor...] {
            expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(discarded, fromProject: id) }
        }
    }

    @Test func stepsAreInsertedAtTheOldCursorWhenNoCursorIsGiven() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(3, to: id)
        var undo = ProjectUpdateRequest(projectID: id)
        undo.stepCursor = 1
        try fixture.storage.update(undo)

        var request = ProjectUpdateRequest(projectID: id)
        request.stepsContentToAdd = [StepContent(userData: Data("a".utf8)), StepContent(userData: Data("b".utf8))]
        try fixture.storage.update(request)
        let after = try fixture.snapshot(id)
        let stepIDs = try #require(after.stepIDs)
        #expect(stepIDs.count == 5)
        #expect(stepIDs[0] == steps[0])
        #expect(Array(stepIDs[3...]) == Array(steps[1...]))
        #expect(try fixture.storage.fetchStep(stepIDs[1], fromProject: id).userData == Data("a".utf8))
        #expect(try fixture.storage.fetchStep(stepIDs[2], fromProject: id).userData == Data("b".utf8))
        #expect(after.stepCursor == 1)
    }

    @Test func insertionThenDeletionThenCursorInOneRequest() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(4, to: id)     // cursor 4
        var request = ProjectUpdateRequest(projectID: id)
        request.stepsContentToAdd = [StepContent(userData: Data("n".utf8))]
        request.stepIDsToDelete = [steps[0], steps[2]]
        // 4 + 1 - 2 = 3 steps; cursor 3 is valid only if deletions are counted after insertion.
        request.stepCursor = 3
        try fixture.storage.update(request)
        let stepIDs = try #require(try fixture.snapshot(id).stepIDs)
        #expect(stepIDs.count == 3)
        #expect(stepIDs[0] == steps[1])
        #expect(stepIDs[1] == steps[3])
        #expect(try fixture.storage.fetchStep(stepIDs[2], fromProject: id).userData == Data("n".utf8))
        #expect(try fixture.snapshot(id).stepCursor == 3)
    }

    @Test func deletingUnknownStepIDsIsIgnored() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(2, to: id)
        var request = ProjectUpdateRequest(projectID: id)
        request.stepIDsToDelete = [UUID(), steps[1], UUID()]
        request.stepCursor = 1
        try fixture.storage.update(request)
        #expect(try fixture.snapshot(id).stepIDs == [steps[0]])
        #expect(try fixture.snapshot(id).stepCursor == 1)
    }

    @Test func unknownIDsDoNotCountTowardsTheCursorLimit() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(2, to: id)
        var request = ProjectUpdateRequest(projectID: id)
        // Two IDs to delete, only one of them real: one step remains, so cursor 1 is valid and 2 is not.
        request.stepIDsToDelete = [steps[0], UUID()]
        request.stepCursor = 2
        expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        request.stepCursor = 1
        try fixture.storage.update(request)
        #expect(try fixture.snapshot(id).stepIDs == [steps[1]])
    }

    @Test(arguments: [-1, 4, 100])
    func invalidCursorChangesNothing(cursor: Int) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        let before = try fixture.snapshot(id)
        let keys = try fixture.store.keys(withPrefix: "")
        var request = ProjectUpdateRequest(projectID: id)
        request.stepsContentToAdd = [StepContent(userData: Data("x".utf8))]
        request.stepCursor = cursor
        request.userData = Data("changed".utf8)
        let error = expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        #expect(error.map { "\($0)".contains(id.uuidString) } == true)
        #expect(try fixture.snapshot(id) == before)
        #expect(try fixture.store.keys(withPrefix: "") == keys)
    }

    @Test func deletionsThatLeaveTheOldCursorBeyondTheEndAreInvalid() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let steps = try fixture.addSteps(2, to: id)   // cursor 2
        var request = ProjectUpdateRequest(projectID: id)
        request.stepIDsToDelete = [steps[0]]
        expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        #expect(try fixture.snapshot(id).stepIDs == steps)
    }

    @Test func userDataKeptWhenTheRequestHasNone() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        var request = ProjectUpdateRequest(projectID: id)
        request.userData = Data("kept".utf8)
        try fixture.storage.update(request)
        try fixture.addSteps(1, to: id)
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        #expect(try fixture.snapshot(id).userData == Data("kept".utf8))
        // Setting empty user data is a change, not "keep".
        request.userData = Data()
        try fixture.storage.update(request)
        #expect(try fixture.snapshot(id).userData == Data())
    }

    @Test func cursorKeptWhenTheRequestHasNone() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        var request = ProjectUpdateRequest(projectID: id)
        request.userData = Data([1])
        try fixture.storage.update(request)
        #expect(try fixture.snapshot(id).stepCursor == 2)
    }

    @Test func everyUpdateSetsTheModificationDate() throws {
        let clock = TestClock()
        let fixture = try Fixture(clock: clock)
        let id = try fixture.storage.createProject()
        let created = clock.now
        clock.advance(by: 60)
        try fixture.storage.update(ProjectUpdateRequest(projectID: id))
        var snapshot = try fixture.snapshot(id)
        #expect(snapshot.creationDate == created)
        #expect(snapshot.modificationDate == clock.now)
        clock.advance(by: 60)
        try fixture.storage.setAsset(Data([1]), named: "a", inProject: id)
        snapshot = try fixture.snapshot(id)
        #expect(snapshot.modificationDate == clock.now)
        clock.advance(by: 60)
        try fixture.storage.removeAsset(named: "a", fromProject: id)
        #expect(try fixture.snapshot(id).modificationDate == clock.now)
        #expect(try fixture.snapshot(id).creationDate == created)
        // A failed update leaves the date alone.
        let before = try fixture.snapshot(id)
        clock.advance(by: 60)
        var bad = ProjectUpdateRequest(projectID: id)
        bad.stepCursor = 5
        expectWarehouseError("invalidArgument") { try fixture.storage.update(bad) }
        #expect(try fixture.snapshot(id) == before)
    }

    @Test func unknownProject() throws {
        let fixture = try Fixture()
        let unknown = UUID()
        var request = ProjectUpdateRequest(projectID: unknown)
        request.stepsContentToAdd = [StepContent(userData: Data([1]))]
        let error = expectWarehouseError("writeFailed") { try fixture.storage.update(request) }
        #expect(error?.projectID == unknown)
        #expect(error?.storeCode == .notFound)
        #expect(try fixture.store.keys(withPrefix: "") == [])
    }

    /// A request that stores nothing (an undo, a redo) is checked only inside its transaction: the
    /// same errors, naming the project, and nothing changes.
    @Test func requestsThatStoreNothingFailLikeTheOthers() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        let before = try fixture.snapshot(id)
        var request = ProjectUpdateRequest(projectID: id)
        request.stepCursor = 3
        let invalid = expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        #expect(invalid.map { "\($0)".contains(id.uuidString) } == true)
        #expect(try fixture.snapshot(id) == before)
        let unknown = UUID()
        var undo = ProjectUpdateRequest(projectID: unknown)
        undo.stepCursor = 0
        let missing = expectWarehouseError("writeFailed") { try fixture.storage.update(undo) }
        #expect(missing?.projectID == unknown)
        #expect(missing?.storeCode == .notFound)
        #expect(try fixture.snapshot(id) == before)
    }

    @Test func updateAfterDeleteFails() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.deleteProject(id)
        expectWarehouseError("writeFailed") { try fixture.storage.update(ProjectUpdateRequest(projectID: id)) }
        #expect(try fixture.store.keys(withPrefix: "") == [])
    }

    // MARK: Atomicity

    @Test func failingValidationMidwayChangesNothing() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(2, to: id)
        let before = try fixture.snapshot(id)
        let keys = try fixture.store.keys(withPrefix: "")
        var request = ProjectUpdateRequest(projectID: id)
        request.userData = Data("new".utf8)
        // The first step's assets are fine, the second's are not.
        request.stepsContentToAdd = [
            StepContent(userData: Data("ok".utf8), assets: ["fine": Data([1])]),
            StepContent(userData: Data("bad".utf8), assets: ["../escape": Data([2])]),
        ]
        request.stepCursor = 4
        expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        #expect(try fixture.snapshot(id) == before)
        #expect(try fixture.store.keys(withPrefix: "") == keys)
    }

    /// The blobs of an update are stored before its commit; when the commit then throws (here: a
    /// step record over the store's reference limit), the project is unchanged and the source
    /// directory is kept.
    @Test func commitThatThrowsAfterTheAssetPutsChangesNothing() throws {
        let directory = TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.limits.maximumReferencesPerRecord = 4
        let store = try Store(at: directory.store, configuration: configuration)
        let storage = ProjectStorage(store: store, bundleID: "b")
        let id = try storage.createProject()
        let first = try #require(ProjectUpdateRequest.addStep(
            try storage.fetchSnapshot(ofProject: id, options: .all), content: StepContent(userData: Data("first".utf8))))
        try storage.update(first)
        let before = try storage.fetchSnapshot(ofProject: id, options: .all)
        let keys = try store.keys(withPrefix: "")

        let files = Dictionary(uniqueKeysWithValues: (0 ..< 8).map { ("f\($0)", bytes(100, seed: UInt64($0))) })
        let source = try directory.directory("source", files: files)
        var request = ProjectUpdateRequest(projectID: id)
        request.userData = Data("project".utf8)
        request.stepsContentToAdd = [
            StepContent(userData: Data("fine".utf8), assets: ["a": Data([1])]),
            StepContent(userData: Data("too many".utf8), assetsSourceURL: source),
        ]
        request.stepCursor = 3
        let error = expectWarehouseError("writeFailed") { try storage.update(request) }
        #expect(error?.projectID == id)
        #expect(error?.storeCode == .limitExceeded)

        let digest = Digest.sha256(bytes(100, seed: 7))
        #expect(store.contains(digest))          // the asset was put ...
        #expect(store.refCount(of: digest) == 0) // ... but nothing references it
        #expect(try storage.fetchSnapshot(ofProject: id, options: .all) == before)
        #expect(try store.keys(withPrefix: "") == keys)
        #expect(FileManager.default.fileExists(atPath: source.appendingPathComponent("f0").path))
    }
}
