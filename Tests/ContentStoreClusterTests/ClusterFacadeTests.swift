import ContentStore
import DataArchive
import Foundation
import Testing
import Warehouse

/// The facades on a cluster store, unchanged: a representative part of the Warehouse and
/// DataArchive suites, on both backends.
@Suite struct ClusterFacadeTests {
    @Test(arguments: StoreBackend.available)
    func warehouseProjectsAndAssets(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let storage = ProjectStorage(store: store, bundleID: "com.example.app")
            let project = try storage.createProject()
            try storage.setAsset(Data("asset bytes".utf8), named: "a/b.bin", inProject: project)
            #expect(try storage.asset(named: "a/b.bin", inProject: project) == Data("asset bytes".utf8))
            #expect(try storage.assetNames(inProject: project) == ["a/b.bin"])
            let copy = try storage.duplicateProject(project)
            #expect(Set(try storage.projectIDs(sortedBy: .creationDate, descending: false)) == [project, copy])
            #expect(try storage.storageSize() == UInt64("asset bytes".utf8.count))
            try storage.deleteProject(project)
            #expect(try storage.asset(named: "a/b.bin", inProject: copy) == Data("asset bytes".utf8))
            #expect(try await store.verify().isClean)
        }
    }

    @Test(arguments: StoreBackend.available)
    func dataArchiveVersions(_ backend: StoreBackend) async throws {
        try await withStore(backend) { store, _ in
            let archive = DataArchive(store: store)
            try await archive.set(Data("v1".utf8), forKey: "doc")
            try await archive.archiveCurrent(andSet: Data("v2".utf8), forKey: "doc")
            #expect(try await archive.data(forKey: "doc") == Data("v2".utf8))
            #expect(try await archive.allVersions(forKey: "doc") == [Data("v2".utf8), Data("v1".utf8)])
            #expect(try await archive.data(forKey: "missing") == nil)
            #expect(try await store.verify().isClean)
        }
    }
}
