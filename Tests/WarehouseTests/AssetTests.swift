import Foundation
import Testing
@testable import Warehouse
import TestThreads

/// Project assets, step assets, asset names, importing a directory and exporting.
@Suite(.blocking) struct AssetTests {
    static let invalidNames = ["", "/abs", "/", "a//b", "a/", "./a", "a/.", "..", "../x", "a/../b", ".", "nul\u{0}name"]
    static let validNames = ["a", "a.png", ".hidden", "dir/sub/file.bin", "..a", "a..", "spaces are fine", "ünïcødé/文件", "a\\b"]

    @Test func projectAssets() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.setAsset(Data("one".utf8), named: "b/one", inProject: id)
        try fixture.storage.setAsset(Data("two".utf8), named: "a", inProject: id)
        #expect(try fixture.storage.assetNames(inProject: id) == ["a", "b/one"])
        #expect(try fixture.storage.asset(named: "b/one", inProject: id) == Data("one".utf8))
        // Replacing.
        try fixture.storage.setAsset(Data("TWO".utf8), named: "a", inProject: id)
        #expect(try fixture.storage.asset(named: "a", inProject: id) == Data("TWO".utf8))
        #expect(fixture.store.refCount(of: Digest.sha256(Data("two".utf8))) == 0)
        // Removing.
        try fixture.storage.removeAsset(named: "a", fromProject: id)
        #expect(try fixture.storage.assetNames(inProject: id) == ["b/one"])
        let missing = expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "a", inProject: id) }
        #expect(missing?.storeCode == .notFound)
        #expect(missing?.projectID == id)
        try fixture.storage.removeAsset(named: "b/one", fromProject: id)
        #expect(try fixture.storage.assetNames(inProject: id) == [])
        #expect(try fixture.store.record(forKey: "warehouse/assets/\(id.uuidString)") == nil)
        // Empty assets are assets.
        try fixture.storage.setAsset(Data(), named: "empty", inProject: id)
        #expect(try fixture.storage.asset(named: "empty", inProject: id) == Data())
    }

    @Test func projectAssetsOfUnknownProjectsAndNames() throws {
        let fixture = try Fixture()
        let unknown = UUID()
        #expect(expectWarehouseError("writeFailed") { try fixture.storage.setAsset(Data([1]), named: "a", inProject: unknown) }?.storeCode == .notFound)
        #expect(expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "a", inProject: unknown) }?.projectID == unknown)
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.assetNames(inProject: unknown) }
        expectWarehouseError("writeFailed") { try fixture.storage.removeAsset(named: "a", fromProject: unknown) }
        let id = try fixture.storage.createProject()
        #expect(expectWarehouseError("writeFailed") { try fixture.storage.removeAsset(named: "nope", fromProject: id) }?.storeCode == .notFound)
        // Nothing was stored for the unknown project.
        #expect(try fixture.store.keys(withPrefix: "") == ["warehouse/project/\(id.uuidString)"])
    }

    @Test(arguments: invalidNames)
    func invalidNamesAreRejectedAndChangeNothing(name: String) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let before = try fixture.snapshot(id)
        expectWarehouseError("invalidArgument") { try fixture.storage.setAsset(Data([1]), named: name, inProject: id) }
        var request = ProjectUpdateRequest(projectID: id)
        request.stepsContentToAdd = [StepContent(userData: Data([1]), assets: ["ok": Data([2]), name: Data([3])])]
        expectWarehouseError("invalidArgument") { try fixture.storage.update(request) }
        #expect(try fixture.snapshot(id) == before)
        #expect(try fixture.storage.assetNames(inProject: id) == [])
        #expect(!fixture.store.contains(Digest.sha256(Data([2]))))
    }

    @Test(arguments: validNames)
    func validNamesRoundTrip(name: String) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.setAsset(Data(name.utf8), named: name, inProject: id)
        #expect(try fixture.storage.asset(named: name, inProject: id) == Data(name.utf8))
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: Data(), assets: [name: Data([7])]))))
        let step = try #require(try fixture.snapshot(id).stepIDs?.first)
        #expect(try fixture.storage.fetchStep(step, fromProject: id).assetNames == [name])
        #expect(try fixture.storage.asset(named: name, inStep: step, ofProject: id) == Data([7]))
    }

    @Test func stepAssetsInMemory() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let content = StepContent(userData: Data("u".utf8), assets: ["z": Data([1]), "a/b": Data([2]), "m": Data()])
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: content)))
        let step = try #require(try fixture.snapshot(id).stepIDs?.first)
        let fetched = try fixture.storage.fetchStep(step, fromProject: id)
        #expect(fetched.assetNames == ["a/b", "m", "z"])
        #expect(fetched.userData == Data("u".utf8))
        #expect(try fixture.storage.asset(named: "a/b", inStep: step, ofProject: id) == Data([2]))
        #expect(try fixture.storage.asset(named: "m", inStep: step, ofProject: id) == Data())

        let missing = expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "q", inStep: step, ofProject: id) }
        #expect(missing?.stepID == step)
        #expect(missing?.storeCode == .notFound)
        let unknownStep = UUID()
        #expect(expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "z", inStep: unknownStep, ofProject: id) }?.stepID == unknownStep)
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "z", inStep: step, ofProject: UUID()) }
        // Project assets and step assets are separate namespaces.
        expectWarehouseError("fetchFailed") { _ = try fixture.storage.asset(named: "z", inProject: id) }
    }

    @Test func importsADirectoryAndRemovesIt() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let files: [String: Data] = [
            "thumbnail.png": bytes(5000, seed: 1),
            "layers/0.bin": bytes(300, seed: 2),
            "layers/deep/1.bin": Data(),
            ".hidden": Data("h".utf8),
        ]
        let source = try fixture.directory.directory("source", files: files)
        try FileManager.default.createDirectory(at: source.appendingPathComponent("empty-dir"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: source.appendingPathComponent("link"), withDestinationURL: source.appendingPathComponent("thumbnail.png"))

        let content = StepContent(userData: Data("with files".utf8), assetsSourceURL: source)
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: content)))

        #expect(!FileManager.default.fileExists(atPath: source.path))
        let step = try #require(try fixture.snapshot(id).stepIDs?.first)
        let fetched = try fixture.storage.fetchStep(step, fromProject: id)
        #expect(fetched.assetNames == [".hidden", "layers/0.bin", "layers/deep/1.bin", "thumbnail.png"])
        for (name, data) in files {
            #expect(try fixture.storage.asset(named: name, inStep: step, ofProject: id) == data)
        }
    }

    @Test func directoryAndMemoryAssetsCombine() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let source = try fixture.directory.directory("source", files: ["f": Data([1])])
        var content = StepContent(userData: Data(), assetsSourceURL: source)
        content.assets = ["m": Data([2])]
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: content)))
        let step = try #require(try fixture.snapshot(id).stepIDs?.first)
        #expect(try fixture.storage.fetchStep(step, fromProject: id).assetNames == ["f", "m"])

        // The same name from both places is ambiguous.
        let clash = try fixture.directory.directory("clash", files: ["m": Data([3])])
        var clashing = StepContent(userData: Data(), assetsSourceURL: clash)
        clashing.assets = ["m": Data([4])]
        expectWarehouseError("invalidArgument") {
            try fixture.storage.update(#require(ProjectUpdateRequest.addStep(try fixture.snapshot(id), content: clashing)))
        }
        #expect(FileManager.default.fileExists(atPath: clash.path))
    }

    enum BadSource: String, CaseIterable { case missing, regularFile, unreadable, remote }

    @Test(arguments: BadSource.allCases)
    func sourceThatIsNotAReadableDirectoryIsWriteFailed(kind: BadSource) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.addSteps(1, to: id)
        let before = try fixture.snapshot(id)
        let keys = try fixture.store.keys(withPrefix: "")
        let url: URL
        switch kind {
        case .missing:
            url = fixture.directory.url.appendingPathComponent("does-not-exist")
        case .regularFile:
            url = fixture.directory.url.appendingPathComponent("file")
            try Data([1]).write(to: url)
        case .unreadable:
            guard getuid() != 0 else { return }   // root reads everything
            url = try fixture.directory.directory("locked", files: ["f": Data([1])])
            try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: url.path)
        case .remote:
            url = URL(string: "https://example.com/assets")!
        }
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: url.path) }

        var request = try #require(ProjectUpdateRequest.addStep(before, content: StepContent(userData: Data("x".utf8), assetsSourceURL: url)))
        request.userData = Data("changed".utf8)
        let error = expectWarehouseError("writeFailed") { try fixture.storage.update(request) }
        #expect(error?.projectID == id)
        #expect(error?.underlying != nil)
        #expect(try fixture.snapshot(id) == before)
        #expect(try fixture.store.keys(withPrefix: "") == keys)
        if kind == .regularFile { #expect(FileManager.default.fileExists(atPath: url.path)) }
    }

    @Test func nilSourceURLMeansNoAssets() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: Data([1]), assetsSourceURL: nil))))
        let step = try #require(try fixture.snapshot(id).stepIDs?.first)
        #expect(try fixture.storage.fetchStep(step, fromProject: id).assetNames == [])
    }

    @Test func exportAssets() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let assets: [String: Data] = ["a.bin": bytes(70_000, seed: 3), "dir/b.txt": Data("b".utf8), "empty": Data()]
        for (name, data) in assets { try fixture.storage.setAsset(data, named: name, inProject: id) }
        let target = fixture.directory.url.appendingPathComponent("export/here")
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        try Data("old".utf8).write(to: target.appendingPathComponent("a.bin"))
        try Data("keep".utf8).write(to: target.appendingPathComponent("unrelated"))

        try fixture.storage.exportAssets(ofProject: id, to: target)
        for (name, data) in assets {
            #expect(try Data(contentsOf: target.appendingPathComponent(name)) == data)
        }
        #expect(try Data(contentsOf: target.appendingPathComponent("unrelated")) == Data("keep".utf8))
        // No temporary files are left.
        let listed = try FileManager.default.contentsOfDirectory(atPath: target.path).sorted()
        #expect(listed == ["a.bin", "dir", "empty", "unrelated"])

        let unknown = UUID()
        #expect(expectWarehouseError("fetchFailed") { try fixture.storage.exportAssets(ofProject: unknown, to: target) }?.storeCode == .notFound)
        let file = fixture.directory.url.appendingPathComponent("a-file")
        try Data([1]).write(to: file)
        #expect(expectWarehouseError("writeFailed") { try fixture.storage.exportAssets(ofProject: id, to: file) }?.projectID == id)
    }

    @Test func identicalAssetsAreStoredOnce() throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        let data = bytes(50_000, seed: 9)
        try fixture.storage.setAsset(data, named: "one", inProject: id)
        try fixture.storage.setAsset(data, named: "two", inProject: id)
        try fixture.storage.update(#require(ProjectUpdateRequest.addStep(
            try fixture.snapshot(id), content: StepContent(userData: data, assets: ["three": data]))))
        let digest = Digest.sha256(data)
        #expect(fixture.store.refCount(of: digest) == 4)
        #expect(try fixture.store.statistics().blobCount == 1)
        #expect(try fixture.storage.sizeOfProject(id) == UInt64(data.count))
    }
}

/// Asset names read back from a store are validated again: a forged store (names written around
/// the Warehouse API) must not make an export write outside its directory.
@Suite(.blocking) struct ForgedStoreTests {
    @Test(arguments: ["../escape", "a/../../escape", "/absolute-escape", "a//b", "./x", "nul\u{0}name", ""])
    func exportRefusesAForgedAssetNameAndWritesNothing(name: String) throws {
        let fixture = try Fixture()
        let id = try fixture.storage.createProject()
        try fixture.storage.setAsset(Data("fine".utf8), named: "fine", inProject: id)
        let digest = try fixture.store.put(Data("forged".utf8))
        let forged = ProjectAssetsRecord(assets: AssetTable(digests: ["fine": try fixture.store.put(Data("fine".utf8)), name: digest]))
        try fixture.store.write { try $0.setRecord(forged.record, forKey: Keys.assets(id)) }

        let outside = fixture.directory.url.appendingPathComponent("export")
        let target = outside.appendingPathComponent("here")
        let error = expectWarehouseError("fetchFailed") { try fixture.storage.exportAssets(ofProject: id, to: target) }
        #expect(error?.storeCode == .corrupted)
        // Nothing was written anywhere: not the target, not beside it, not at the root.
        #expect(!FileManager.default.fileExists(atPath: outside.path))
        #expect(!FileManager.default.fileExists(atPath: "/absolute-escape"))
        let listed = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.url.path).sorted()
        #expect(listed == ["store"])
        // Reading the project's assets fails the same way instead of handing the name on.
        #expect(throws: (any Error).self) { try fixture.storage.projectAssets(id, in: fixture.store.makeSnapshot()) }
    }
}
