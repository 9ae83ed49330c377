import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// `ProjectUpdateRequest.undo/redo/addStep` construction, without a store.
@Suite(.blocking) struct RequestConstructionTests {
    static let ids = (0 ..< 4).map { _ in UUID() }

    /// (cursor, step count) pairs: empty, cursor at 0, in the middle, at the end.
    static let positions: [(cursor: Int, count: Int)] = [(0, 0), (0, 4), (2, 4), (4, 4)]

    func snapshot(cursor: Int, count: Int, withStepIDs: Bool = true) -> ProjectSnapshot {
        ProjectSnapshot(id: UUID(), bundleID: "b", stepIDs: withStepIDs ? Array(Self.ids.prefix(count)) : nil, stepCursor: cursor)
    }

    @Test(arguments: positions)
    func undo(cursor: Int, count: Int) {
        let snapshot = snapshot(cursor: cursor, count: count)
        let request = ProjectUpdateRequest.undo(snapshot)
        if cursor == 0 {
            #expect(request == nil)
            #expect(!snapshot.canUndo)
        } else {
            #expect(request?.projectID == snapshot.id)
            #expect(request?.stepCursor == cursor - 1)
            #expect(request?.stepIDsToDelete == [])
            #expect(request?.stepsContentToAdd == [])
            #expect(request?.userData == nil)
        }
    }

    @Test(arguments: positions)
    func redo(cursor: Int, count: Int) {
        let snapshot = snapshot(cursor: cursor, count: count)
        let request = ProjectUpdateRequest.redo(snapshot)
        if cursor == count {
            #expect(request == nil)
            #expect(!snapshot.canRedo)
        } else {
            #expect(request?.projectID == snapshot.id)
            #expect(request?.stepCursor == cursor + 1)
            #expect(request?.stepIDsToDelete == [])
            #expect(request?.stepsContentToAdd == [])
        }
    }

    @Test(arguments: positions)
    func addStep(cursor: Int, count: Int) throws {
        let snapshot = snapshot(cursor: cursor, count: count)
        let content = StepContent(userData: Data("new".utf8), assets: ["a": Data([1])])
        let request = try #require(ProjectUpdateRequest.addStep(snapshot, content: content))
        #expect(request.projectID == snapshot.id)
        #expect(request.stepIDsToDelete == Array(Self.ids[cursor ..< count]))
        #expect(request.stepsContentToAdd == [content])
        #expect(request.stepCursor == cursor + 1)
        #expect(request.userData == nil)
    }

    @Test(arguments: [0, 2])
    func nilStepIDs(cursor: Int) {
        let snapshot = snapshot(cursor: cursor, count: 4, withStepIDs: false)
        #expect(ProjectUpdateRequest.redo(snapshot) == nil)
        #expect(ProjectUpdateRequest.addStep(snapshot, content: StepContent(userData: Data())) == nil)
        #expect(!snapshot.canRedo)
        // Undo needs only the cursor.
        #expect(ProjectUpdateRequest.undo(snapshot)?.stepCursor == (cursor == 0 ? nil : cursor - 1))
        #expect(snapshot.canUndo == (cursor != 0))
    }

    @Test func newRequestIsEmpty() {
        let id = UUID()
        let request = ProjectUpdateRequest(projectID: id)
        #expect(request.projectID == id)
        #expect(request.stepCursor == nil)
        #expect(request.stepIDsToDelete.isEmpty)
        #expect(request.stepsContentToAdd.isEmpty)
        #expect(request.userData == nil)
    }

    @Test func fetchOptions() {
        #expect(ProjectFetchOptions.all == [.stepIDs, .userData])
        #expect(!ProjectFetchOptions().contains(.stepIDs))
    }
}
