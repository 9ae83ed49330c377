import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing
import TestThreads

@Suite struct AsyncAPITests {
    let directory = TemporaryDirectory()

    @Test func setArchiveReadKeepDelete() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        try await archive.set(bytes("a"), forKey: "doc")
        try await archive.set(bytes("b"), forKey: "doc")        // replaces, no archive
        #expect(try await archive.data(forKey: "doc") == bytes("b"))
        for version in ["c", "d", "e"] { try await archive.archiveCurrent(andSet: bytes(version), forKey: "doc") }
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["e", "d", "c", "b"])
        try await archive.keep(upTo: 2, archivesForKey: "doc")
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["e", "d", "c"])
        try await archive.keep(upTo: 10, archivesForKey: "doc")
        #expect(archive.numberOfArchives(key: "doc") == 2)
        try await archive.delete(key: "doc")
        #expect(try await archive.data(forKey: "doc") == nil)
        #expect(try await archive.allVersions(forKey: "doc") == [])
        // Written again at once.
        try await archive.archiveCurrent(andSet: bytes("f"), forKey: "doc")
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["f"])
    }

    @Test func asyncAndCallbackCallsShareOneOrder() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        archive.set(key: "doc", data: bytes("1"))                          // fire and forget
        archive.archiveCurrent(key: "doc", andSetNewData: bytes("2"))
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["2", "1"])
        let stream = archive.versions(forKey: "doc")                        // snapshot queued here
        archive.archiveCurrent(key: "doc", andSetNewData: bytes("3"))
        try await archive.archiveCurrent(andSet: bytes("4"), forKey: "doc")
        var streamed: [String] = []
        for try await version in stream { streamed.append(text(version)!) }
        #expect(streamed == ["2", "1"])
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["4", "3", "2", "1"])
    }

    /// Async changes commit on the caller's thread when their key is idle and on the workers when
    /// another task is committing: either way, every task's changes land in its own order, and a
    /// failure is thrown to the task that made it.
    @Test func concurrentTasksCommitInOrderAndFailuresReachTheirCaller() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0 ..< 16 {
                group.addTask {
                    for version in 0 ..< 20 {
                        try await archive.archiveCurrent(andSet: bytes("\(task).\(version)"), forKey: "doc \(task)")
                        archive.set(key: "doc \(task)", data: bytes("\(task).\(version)!"))   // queued on the lane
                    }
                    await #expect(throws: StoreError.self) { try await archive.set(bytes("x"), forKey: "") }
                }
            }
            try await group.waitForAll()
        }
        for task in 0 ..< 16 {
            let expected = [bytes("\(task).19!")] + (0 ..< 19).reversed().map { bytes("\(task).\($0)!") }
            #expect(try await archive.allVersions(forKey: "doc \(task)") == expected)
        }
        #expect(archive.keys.count == 16)
    }

    @Test func versionsStreamIsLazyAndReadsOneSnapshot() async throws {
        let store = try makeStore(directory)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        for index in 1 ... 5 { try await archive.archiveCurrent(andSet: bytes("v\(index)"), forKey: "doc") }
        var iterator = archive.versions(forKey: "doc").makeAsyncIterator()
        #expect(try await iterator.next().map(text) == "v5")
        // Writes and drops after the snapshot change nothing the stream yields.
        try await archive.keep(upTo: 1, archivesForKey: "doc")
        try await archive.set(bytes("replaced"), forKey: "doc")
        _ = try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        var rest: [String] = []
        while let version = try await iterator.next() { rest.append(text(version)!) }
        #expect(rest == ["v4", "v3", "v2", "v1"])
        #expect(try await archive.allVersions(forKey: "doc").map(text) == ["replaced", "v4"])
    }

    @Test func cancellingTheConsumerEndsTheVersionsStream() async throws {
        let clock = TestClock()
        let store = try makeStore(directory, clock: clock)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        let versions = (1 ... 5).map { bytes("version \($0)") }
        for version in versions { try await archive.archiveCurrent(andSet: version, forKey: "doc") }

        // The consumer cancels its own task after the first version.
        let received = try await Task {
            var received: [Data] = []
            for try await version in archive.versions(forKey: "doc") {
                received.append(version)
                withUnsafeCurrentTask { $0?.cancel() }
            }
            return received
        }.value
        #expect(received == [versions[4]])

        // Cancelled from outside while waiting between versions.
        let firstArrived = Countdown(1)
        let proceed = Countdown(1)
        let consumer = Task {
            var received: [Data] = []
            for try await version in archive.versions(forKey: "doc") {
                received.append(version)
                if received.count == 1 {
                    firstArrived.tick()
                    await proceed.wait()
                }
            }
            return received
        }
        await firstArrived.wait()
        consumer.cancel()
        proceed.tick()
        #expect(try await consumer.value.count == 1)

        // The cancelled streams released their snapshots: once the key is gone, collection frees every version.
        try await archive.delete(key: "doc")
        clock.advance(seconds: 10)
        let report = try await store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(report.blobsRemoved == 5)
        for version in versions { #expect(!store.contains(Digest.sha256(version))) }
    }

    @Test func storeThatCannotOpenFailsEveryCallAndNeverCrashes() async throws {
        // `<root>/data_archive` is a file, so no store can be opened there.
        try Data("not a store".utf8).write(to: directory.url.appendingPathComponent("data_archive"))
        let archive = DataArchive(rootUrl: directory.url)
        #expect(storeError(await archive.setAndWait("k", bytes("v")))?.code == .unsupportedFormat)
        #expect(storeError(await archive.getAndWait("k").1) != nil)
        #expect(storeError(await archive.getAllAndWait("k").1) != nil)
        #expect(storeError(await archive.deleteAndWait("k")) != nil)
        #expect(await archive.readerAndWait("k") == nil)
        #expect(archive.keys.isEmpty)
        #expect(archive.numberOfArchives(key: "k") == 0)
        await #expect(throws: StoreError.self) { try await archive.set(bytes("v"), forKey: "k") }
        await #expect(throws: StoreError.self) { try await archive.allVersions(forKey: "k") }
        // Once the obstacle is gone, the next call opens the store.
        try FileManager.default.removeItem(at: directory.url.appendingPathComponent("data_archive"))
        #expect(await archive.setAndWait("k", bytes("v")).isSuccess)
        #expect(try await archive.data(forKey: "k") == bytes("v"))
    }

    @Test(.blocking) func initOpensTheStoreUnderRoot() throws {
        let root = directory.url.appendingPathComponent("nested/root")
        let archive = DataArchive(rootUrl: root)
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("data_archive/FORMAT").path))
        #expect(archive.keys.isEmpty)
    }
}
