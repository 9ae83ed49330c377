import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// The original library's defects, each fixed and pinned down here.
@Suite struct RegressionTests {
    let directory = TemporaryDirectory()

    @Test func defaultRootFollowsXDGDataHome() {
        #expect(DataArchive.defaultRootURL(environment: ["XDG_DATA_HOME": "/data/home", "HOME": "/home/u"]).path == "/data/home")
        #expect(DataArchive.defaultRootURL(environment: ["HOME": "/home/u"]).path == "/home/u/.local/share")
        // Empty or relative XDG_DATA_HOME is ignored, as the XDG spec says.
        #expect(DataArchive.defaultRootURL(environment: ["XDG_DATA_HOME": "", "HOME": "/home/u"]).path == "/home/u/.local/share")
        #expect(DataArchive.defaultRootURL(environment: ["XDG_DATA_HOME": "rel/dir", "HOME": "/home/u"]).path == "/home/u/.local/share")
        // No HOME either: still a path, never a crash.
        #expect(DataArchive.defaultRootURL(environment: [:]).path.hasSuffix(".local/share"))
    }

    /// The original force-unwrapped a Library directory that does not exist on Linux.
    @Test func defaultInstanceWorksOnLinux() async throws {
        let expected = DataArchive.defaultRootURL().appendingPathComponent("data_archive").standardizedFileURL.path
        #expect(DataArchive.default.directory.path == expected)
        let key = "regression-default-\(UUID().uuidString)"
        let set = await DataArchive.default.setAndWait(key, bytes("hello"))
        if let error = storeError(set), error.code == .locked {
            // Another process has the shared default store open; the call reported it instead of crashing.
            return
        }
        #expect(set.isSuccess)
        let (data, result) = await DataArchive.default.getAndWait(key)
        #expect(result.isSuccess)
        #expect(text(data) == "hello")
        #expect(await DataArchive.default.deleteAndWait(key).isSuccess)
        #expect(!DataArchive.default.keys.contains(key))
    }

    /// The original kept a per-key queue table that delete left stale.
    @Test func deletedKeyCanBeWrittenAgainBySameInstance() async {
        let archive = DataArchive(rootUrl: directory.url)
        #expect(await archive.archiveAndWait("doc", bytes("one")).isSuccess)
        #expect(await archive.archiveAndWait("doc", bytes("two")).isSuccess)
        #expect(await archive.deleteAndWait("doc").isSuccess)
        #expect(await archive.getAndWait("doc").0 == nil)
        // Fire and forget straight after the delete.
        archive.set(key: "doc", data: bytes("three"))
        let (versions, result) = await archive.getAllAndWait("doc")
        #expect(result.isSuccess)
        #expect(versions.map(text) == ["three"])
        #expect(archive.numberOfArchives(key: "doc") == 0)
        #expect(archive.keys == ["doc"])
    }

    /// The original's reader looped on the current value forever when there were no archives.
    @Test func readerWithNoArchivesFinishes() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        #expect(await archive.setAndWait("single", bytes("only")).isSuccess)
        let reader = try #require(await archive.readerAndWait("single"))
        #expect(!reader.isFinished)
        let (first, firstResult) = await reader.nextAndWait()
        #expect(firstResult.isSuccess)
        #expect(text(first) == "only")
        let (end, endResult) = await reader.nextAndWait()
        #expect(end == nil)
        #expect(isLockingReaderWasFinished(endResult))
        #expect(reader.isFinished)
        // And it stays finished.
        #expect(isLockingReaderWasFinished(await reader.nextAndWait().1))
    }

    /// The original moved the current value aside, wrote nothing when `toData` was nil, and then
    /// deleted the moved file: a silent delete.
    @Test func nilToDataIsAnErrorAndDeletesNothing() async {
        let archive = DataArchive(rootUrl: directory.url)
        #expect(await archive.setAndWait("doc", bytes("keep me")).isSuccess)
        let set = await result { archive.set(key: "doc", value: UnencodableValue(), completionHandler: $0) }
        #expect(!set.isSuccess)
        #expect(couldNotConvertFileURL(set)?.lastPathComponent == "0.dat")
        let archived = await result { archive.archiveCurrent(key: "doc", andSetNew: UnencodableValue(), completionHandler: $0) }
        #expect(!archived.isSuccess)
        #expect(couldNotConvertFileURL(archived) != nil)
        let (versions, result) = await archive.getAllAndWait("doc")
        #expect(result.isSuccess)
        #expect(versions.map(text) == ["keep me"])
        // On a missing key it creates nothing either.
        let onMissing = await DataArchiveTests.result { archive.set(key: "missing", value: UnencodableValue(), completionHandler: $0) }
        #expect(!onMissing.isSuccess)
        #expect(archive.keys == ["doc"])
    }

    /// The original reported `couldNotArchiveButCouldSet` when there was nothing to archive.
    @Test func firstArchiveCurrentOnEmptyKeyIsPlainSuccess() async {
        let archive = DataArchive(rootUrl: directory.url)
        let result = await archive.archiveAndWait("fresh", bytes("v1"))
        #expect(result.isSuccess)
        #expect(archive.numberOfArchives(key: "fresh") == 0)
        #expect(await archive.getAllAndWait("fresh").0.map(text) == ["v1"])
    }

    /// The original created a key's folder on every access, reads included.
    @Test func readsNeverCreateKeys() async throws {
        let store = try makeStore(directory)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let key = "never-written"
        #expect(await archive.getAndWait(key) == (nil, .success))
        #expect(isFileNotFound(await archive.getPersonAndWait(key).1))
        let (all, allResult) = await archive.getAllAndWait(key)
        #expect(all.isEmpty)
        #expect(isFileNotFound(allResult))
        #expect(await archive.readerAndWait(key) == nil)
        #expect(archive.numberOfArchives(key: key) == 0)
        #expect(await archive.keepAndWait(3, key).isSuccess)
        #expect(await archive.deleteAndWait(key).isSuccess)
        #expect(try await archive.data(forKey: key) == nil)
        #expect(try await archive.allVersions(forKey: key).isEmpty)
        for try await _ in archive.versions(forKey: key) { Issue.record("a missing key has no versions") }
        try await archive.keep(upTo: 1, archivesForKey: key)
        try await archive.delete(key: key)
        #expect(archive.keys.isEmpty)
        #expect(try await store.statistics().recordCount == 0)
    }

    /// The original called the completion synchronously for a bad limit.
    @Test func keepWithNonPositiveLimitFailsAsynchronouslyAndChangesNothing() async {
        let archive = DataArchive(rootUrl: directory.url)
        for version in ["a", "b", "c"] { archive.archiveCurrent(key: "doc", andSetNewData: bytes(version)) }
        for limit in [0, -1, Int.min] {
            #expect(isLimitNeedsToBePositiveNumber(await archive.keepAndWait(limit, "doc")))
        }
        #expect(await archive.getAllAndWait("doc").0.map(text) == ["c", "b", "a"])
        await #expect(throws: StoreError(code: .invalidArgument, message: "")) {
            try await archive.keep(upTo: 0, archivesForKey: "doc")
        }
        #expect(archive.numberOfArchives(key: "doc") == 2)
    }
}

extension DataArchiveResult: Equatable {
    /// Tests compare simple cases only.
    public static func == (lhs: DataArchiveResult, rhs: DataArchiveResult) -> Bool {
        switch (lhs, rhs) {
        case (.success, .success), (.limitNeedsToBePositiveNumber, .limitNeedsToBePositiveNumber),
             (.lockingReaderWasFinished, .lockingReaderWasFinished), (.couldNotArchiveButCouldSet, .couldNotArchiveButCouldSet):
            true
        case (.fileNotFound(let a), .fileNotFound(let b)): a == b
        default: false
        }
    }
}
