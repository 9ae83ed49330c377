import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// Duplicating projects, sizes, and collection of a deleted project's blobs.
@Suite(.blocking) struct DuplicateAndSizeTests {
    /// A project with user data, a project asset and two steps (one with a directory asset).
    func makeProject(_ fixture: Fixture) throws -> UUID {
        let id = try fixture.storage.createProject()
        try fixture.storage.setAsset(Data("large amount of data for project".utf8), named: "projectAsset", inProject: id)
        let source = try fixture.directory.directory("step-assets", files: ["stepAsset": Data("large amount of data for step".utf8)])
        var request = try #require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: Data("first step".utf8), assetsSourceURL: source)))
        request.userData = Data("project user data".utf8)
        try fixture.storage.update(request)
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: Data("second".utf8), assets: ["s2": Data([2])]))))
        try fixture.storage.update(#require(ProjectUpdateRequest.undo(try fixture.snapshot(id))))
        return id
    }

    @Test func duplicateCopiesEverything() throws {
        let clock = TestClock()
        let fixture = try Fixture(clock: clock)
        let id = try makeProject(fixture)
        clock.advance(by: 100)
        let copy = try fixture.storage.duplicateProject(id)
        #expect(copy != id)

        let original = try fixture.snapshot(id)
        let duplicated = try fixture.snapshot(copy)
        #expect(Set(try fixture.storage.projectIDs(sortedBy: .creationDate, descending: true)) == [id, copy])
        #expect(duplicated.bundleID == original.bundleID)
        #expect(duplicated.stepIDs == original.stepIDs)
        #expect(duplicated.stepCursor == original.stepCursor)
        #expect(duplicated.stepCursor == 1)
        #expect(duplicated.userData == original.userData)
        #expect(duplicated.creationDate == clock.now)
        #expect(duplicated.modificationDate == clock.now)
        #expect(original.creationDate != clock.now)

        #expect(try fixture.storage.assetNames(inProject: copy) == ["projectAsset"])
        #expect(try fixture.storage.asset(named: "projectAsset", inProject: copy) == Data("large amount of data for project".utf8))
        for stepID in try #require(original.stepIDs) {
            let a = try fixture.storage.fetchStep(stepID, fromProject: id)
            let b = try fixture.storage.fetchStep(stepID, fromProject: copy)
            #expect(b.id == a.id)
            #expect(b.projectID == copy)
            #expect(b.userData == a.userData)
            #expect(b.assetNames == a.assetNames)
            for name in a.assetNames {
                #expect(try fixture.storage.asset(named: name, inStep: stepID, ofProject: copy)
                    == fixture.storage.asset(named: name, inStep: stepID, ofProject: id))
            }
        }
        #expect(try fixture.storage.sizeOfProject(copy) == fixture.storage.sizeOfProject(id))
    }

    @Test func duplicatesAreIndependent() throws {
        let fixture = try Fixture()
        let id = try makeProject(fixture)
        let copy = try fixture.storage.duplicateProject(id)
        let steps = try #require(try fixture.snapshot(id).stepIDs)

        // Change the copy every way there is ...
        try fixture.storage.setAsset(Data("changed".utf8), named: "projectAsset", inProject: copy)
        try fixture.storage.setAsset(Data("new".utf8), named: "extra", inProject: copy)
        var request = try #require(ProjectUpdateRequest.addStep(try fixture.snapshot(copy), content: StepContent(userData: Data("copy step".utf8))))
        request.userData = Data("copy user data".utf8)
        try fixture.storage.update(request)
        // ... and delete a step from the original.
        var deletion = ProjectUpdateRequest(projectID: id)
        deletion.stepIDsToDelete = [steps[1]]
        try fixture.storage.update(deletion)

        let original = try fixture.snapshot(id)
        #expect(original.userData == Data("project user data".utf8))
        #expect(original.stepIDs == [steps[0]])
        #expect(try fixture.storage.asset(named: "projectAsset", inProject: id) == Data("large amount of data for project".utf8))
        #expect(try fixture.storage.assetNames(inProject: id) == ["projectAsset"])
        let duplicated = try fixture.snapshot(copy)
        #expect(duplicated.userData == Data("copy user data".utf8))
        #expect(duplicated.stepIDs?.count == 2)     // step 0, then the new one replaced step 1
        #expect(try fixture.storage.fetchStep(steps[0], fromProject: copy).userData == Data("first step".utf8))
        // The copy's step 1 was discarded by its add-step; the original's by the deletion.
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(steps[1], fromProject: copy) }
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchStep(steps[1], fromProject: id) }

        // Deleting the original leaves the copy whole.
        try fixture.storage.deleteProject(id)
        #expect(try fixture.storage.asset(named: "stepAsset", inStep: steps[0], ofProject: copy) == Data("large amount of data for step".utf8))
    }

    @Test func duplicateSharesBlobsInsteadOfCopying() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let big = bytes(3 << 20, seed: 5)
        try fixture.storage.setAsset(big, named: "big", inProject: id)
        let stored = try fixture.store.statistics().storedBytes
        let copy = try fixture.storage.duplicateProject(id)
        #expect(try fixture.store.statistics().storedBytes == stored)
        #expect(fixture.store.refCount(of: Digest.sha256(big)) == 2)
        #expect(try fixture.storage.asset(named: "big", inProject: copy) == big)
    }

    @Test func duplicateUnknownProject() throws {
        let fixture = try Fixture()
        let unknown = UUID()
        let error = expectWarehouseError("writeFailed") { _ = try fixture.storage.duplicateProject(unknown) }
        #expect(error?.projectID == unknown)
        #expect(error?.storeCode == .notFound)
        #expect(try fixture.store.keys(withPrefix: "") == [])
    }

    @Test func sizesAreExact() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        #expect(try fixture.storage.sizeOfProject(id) == 0)
        #expect(try fixture.storage.storageSize() == 0)

        try fixture.storage.setAsset(bytes(1000, seed: 1), named: "a", inProject: id)
        #expect(try fixture.storage.sizeOfProject(id) == 1000)

        // Step user data and assets count; a blob used twice counts once.
        var request = try #require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: bytes(300, seed: 2), assets: ["s": bytes(2000, seed: 3), "dup": bytes(1000, seed: 1)])))
        request.userData = bytes(40, seed: 4)
        try fixture.storage.update(request)
        #expect(try fixture.storage.sizeOfProject(id) == 1000 + 300 + 2000 + 40)

        // Undo keeps the step (it can be redone), so its bytes still count.
        try fixture.storage.update(#require(ProjectUpdateRequest.undo(try fixture.snapshot(id))))
        #expect(try fixture.storage.sizeOfProject(id) == 3340)

        // Replacing an asset swaps its size.
        try fixture.storage.setAsset(bytes(10, seed: 5), named: "a", inProject: id)
        #expect(try fixture.storage.sizeOfProject(id) == 3340 - 1000 + 10 + 1000)   // "dup" still holds the old bytes

        let other = try fixture.storage.createProject()
        try fixture.storage.setAsset(bytes(500, seed: 6), named: "x", inProject: other)
        try fixture.storage.setAsset(bytes(2000, seed: 3), named: "shared", inProject: other)
        #expect(try fixture.storage.sizeOfProject(other) == 2500)
        // The storage counts distinct blobs across projects: seed 3 once.
        #expect(try fixture.storage.storageSize() == 3350 + 500)

        let copy = try fixture.storage.duplicateProject(id)
        #expect(try fixture.storage.sizeOfProject(copy) == 3350)
        #expect(try fixture.storage.storageSize() == 3850)

        let unknown = UUID()
        let error = expectWarehouseError("calculateSizeFailed") { _ = try fixture.storage.sizeOfProject(unknown) }
        #expect(error?.projectID == unknown)
        #expect(error?.storeCode == .notFound)
    }

    @Test func deletedProjectsBlobsAreCollected() throws {
        let fixture = try Fixture()
        let id = try makeProject(fixture)
        let kept = try fixture.storage.createProject()
        let shared = Data("large amount of data for step".utf8)
        try fixture.storage.setAsset(shared, named: "shared", inProject: kept)
        let own = [
            Data("large amount of data for project".utf8), Data("project user data".utf8),
            Data("first step".utf8), Data("second".utf8), Data([2]),
        ].map(Digest.sha256)
        for digest in own { #expect(fixture.store.contains(digest)) }

        try fixture.storage.deleteProject(id)
        for digest in own { #expect(fixture.store.refCount(of: digest) == 0) }
        let report = try fixture.store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved >= own.count)
        for digest in own { #expect(!fixture.store.contains(digest)) }
        // The blob the other project shares survives.
        #expect(fixture.store.contains(Digest.sha256(shared)))
        #expect(try fixture.storage.asset(named: "shared", inProject: kept) == shared)
        #expect(try fixture.store.verify(VerificationOptions(readData: true)).isClean)
    }

    @Test func discardedStepsAndReplacedDataAreCollected() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let asset = bytes(4096, seed: 11)
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: Data("u1".utf8), assets: ["a": asset]))))
        try fixture.storage.update(#require(ProjectUpdateRequest.undo(try fixture.snapshot(id))))
        var request = try #require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: StepContent(userData: Data("u2".utf8))))
        request.userData = Data("p".utf8)
        try fixture.storage.update(request)
        _ = try fixture.store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(!fixture.store.contains(Digest.sha256(asset)))
        #expect(!fixture.store.contains(Digest.sha256(Data("u1".utf8))))
        #expect(fixture.store.contains(Digest.sha256(Data("u2".utf8))))
        #expect(try fixture.snapshot(id).userData == Data("p".utf8))
    }
}
