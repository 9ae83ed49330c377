import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// The record encodings of Docs/warehouse.md.
@Suite(.blocking) struct RecordFormatTests {
    @Test func projectRecordBytes() throws {
        let step = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!
        let digest = Digest.sha256(Data("u".utf8))
        let project = ProjectRecord(
            creationDate: Date(timeIntervalSinceReferenceDate: 1), modificationDate: Date(timeIntervalSinceReferenceDate: -2.5),
            stepCursor: 300, bundleID: "b", userData: digest, stepIDs: [step])
        let record = project.record
        var expected: [UInt8] = [1, 0x50]
        expected += [0, 0, 0, 0, 0, 0, 0xF0, 0x3F]              // 1.0
        expected += [0, 0, 0, 0, 0, 0, 0x04, 0xC0]              // -2.5
        expected += [0xAC, 0x02]                                // 300
        expected += [1]                                         // has user data
        expected += [1, 0x62]                                   // "b"
        expected += [1] + (0 ..< 16).map { UInt8($0 * 0x11) }   // one step
        #expect([UInt8](record.value) == expected)
        #expect(record.references == [digest])
        #expect(try ProjectRecord(record) == project)
        var withoutSteps = project
        withoutSteps.stepIDs = []
        #expect(try ProjectRecord(record, includingSteps: false) == withoutSteps)
    }

    /// The step list is read and written in one pass: 16 bytes per ID, in order, at the end.
    @Test func manyStepIDsRoundTripInOrder() throws {
        let steps = (0 ..< 1000).map { _ in UUID() } + [UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!]
        let project = ProjectRecord(
            creationDate: Date(timeIntervalSinceReferenceDate: 5), modificationDate: Date(timeIntervalSinceReferenceDate: 6),
            stepCursor: 7, bundleID: "bundle", userData: nil, stepIDs: steps)
        let value = [UInt8](project.record.value)
        let list = value.suffix(16 * steps.count)
        #expect(Array(list.suffix(16)) == (0 ..< 16).map { UInt8($0 * 0x11) })
        #expect(Array(list.prefix(16)) == withUnsafeBytes(of: steps[0].uuid) { Array($0) })
        #expect(try ProjectRecord(project.record) == project)
        // A list one byte short is damage, not a shorter list.
        var truncated = project.record
        truncated.value = truncated.value.dropLast()
        #expect(throws: StoreError.self) { _ = try ProjectRecord(truncated) }
        #expect(throws: StoreError.self) { _ = try ProjectRecordKeepingSteps(truncated) }
    }

    /// Undo, redo and date changes keep the stored step list: the same bytes as decoding every ID
    /// and encoding them again.
    @Test func changesKeepingTheStepListMatchAFullRewrite() throws {
        let digest = Digest.sha256(Data("u".utf8))
        var project = ProjectRecord(
            creationDate: Date(timeIntervalSinceReferenceDate: 5), modificationDate: Date(timeIntervalSinceReferenceDate: 6),
            stepCursor: 40, bundleID: "bundle", userData: digest, stepIDs: (0 ..< 300).map { _ in UUID() })
        let stored = project.record
        var kept = try ProjectRecordKeepingSteps(stored)
        #expect(kept.stepCount == 300)
        #expect(kept.fields.stepIDs.isEmpty)
        #expect(kept.record == stored)
        kept.fields.stepCursor = 39
        kept.fields.userData = nil
        kept.fields.modificationDate = Date(timeIntervalSinceReferenceDate: 7)
        project.stepCursor = 39
        project.userData = nil
        project.modificationDate = Date(timeIntervalSinceReferenceDate: 7)
        #expect(kept.record == project.record)
        #expect(try ProjectRecord(kept.record) == project)
        var trailing = stored
        trailing.value.append(0)
        #expect(throws: StoreError.self) { _ = try ProjectRecordKeepingSteps(trailing) }
    }

    @Test func stepAndAssetRecordsRoundTrip() throws {
        let digests = (0 ..< 3).map { Digest.sha256(Data([UInt8($0)])) }
        let table = AssetTable(digests: ["b": digests[1], "a/x": digests[2]])
        let step = StepRecord(userData: digests[0], assets: table)
        #expect(step.record.references == [digests[0], digests[2], digests[1]])
        #expect([UInt8](step.record.value) == [1, 0x53, 1, 2, 3] + Array("a/x".utf8) + [1] + Array("b".utf8))
        #expect(try StepRecord(step.record) == step)
        let noUserData = StepRecord(userData: nil, assets: AssetTable())
        #expect([UInt8](noUserData.record.value) == [1, 0x53, 0, 0])
        #expect(try StepRecord(noUserData.record) == noUserData)
        let assets = ProjectAssetsRecord(assets: table)
        #expect(try ProjectAssetsRecord(assets.record) == assets)
    }

    @Test(arguments: [
        [UInt8](),
        [1],
        [2, 0x50],                      // newer format version
        [1, 0x53],                      // wrong kind
        [1, 0x50, 0, 0, 0],             // truncated date
    ])
    func malformedProjectValuesAreErrors(value: [UInt8]) {
        #expect(throws: StoreError.self) { _ = try ProjectRecord(Record(value: Data(value))) }
    }

    @Test func mismatchedReferencesAreErrors() {
        let table = AssetTable(digests: ["a": Digest.sha256(Data())])
        var record = ProjectAssetsRecord(assets: table).record
        record.references = []
        #expect(throws: StoreError.self) { _ = try ProjectAssetsRecord(record) }
        var project = ProjectRecord(creationDate: Date(), modificationDate: Date(), stepCursor: 0, bundleID: "", userData: nil, stepIDs: []).record
        project.references = [Digest.sha256(Data())]
        #expect(throws: StoreError.self) { _ = try ProjectRecord(project) }
    }

    @Test func damagedRecordInTheStoreIsAFetchError() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.store.write { try $0.setRecord(Record(value: Data([9, 9, 9])), forKey: "warehouse/project/\(id.uuidString)") }
        let error = expectWarehouseError("fetchFailed") { _ = try fixture.storage.fetchSnapshot(ofProject: id) }
        #expect(error?.storeCode == .unsupportedFormat)
        expectWarehouseError("writeFailed") { try fixture.storage.update(ProjectUpdateRequest(projectID: id)) }
    }

    @Test func keyScheme() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.setAsset(Data([1]), named: "a", inProject: id)
        let step = try #require(try fixture.addSteps(1, to: id).first)
        #expect(try fixture.store.keys(withPrefix: "") == [
            "warehouse/assets/\(id.uuidString)",
            "warehouse/project/\(id.uuidString)",
            "warehouse/step/\(id.uuidString)/\(step.uuidString)",
        ])
    }
}
