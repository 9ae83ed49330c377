import ContentStore
import Dispatch
import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing
@testable import ContentStoreCluster

/// Grouped single-blob puts (Docs/cluster.md §3.1 steps 2–4, `Engine/PutGroup.swift`).
@Suite struct ClusterPutGroupTests {
    /// Puts that arrive while every leader is busy form one group, stored by one call.
    @Test func putsQueuedBehindBusyLeadersAreStoredTogether() async throws {
        let group = PutGroup(byteLimit: 1 << 20)
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let groups = Locked<[Int]>([])
        let count = PutGroup.leaderLimit + 5
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in 0 ..< count {
                tasks.addTask {
                    try await onThread {
                        try group.submit(Self.member(index, size: 100)) { members in
                            let first = groups.withLock { $0.append(members.count); return $0.count <= PutGroup.leaderLimit }
                            if first {
                                started.signal()
                                release.wait()
                            }
                            return [:]
                        }
                    }
                }
                // The first leaders are busy before the others arrive, so those queue.
                if index < PutGroup.leaderLimit { await wait(for: started) }
            }
            try await until { group.queued == 5 }
            // One leader ends: its successor takes all five; then the other leaders end.
            release.signal()
            try await until { groups.withLock { $0.count } == PutGroup.leaderLimit + 1 }
            for _ in 1 ..< PutGroup.leaderLimit { release.signal() }
            try await tasks.waitForAll()
        }
        #expect(groups.withLock { $0 } == Array(repeating: 1, count: PutGroup.leaderLimit) + [5])
    }

    /// A group holds at most the byte limit (and always its first member); a group that stored
    /// nothing fails all its members, one that lost some fails exactly those.
    @Test func groupsRespectTheByteLimitAndFailOnlyTheirMembers() async throws {
        let group = PutGroup(byteLimit: 250)
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let groups = Locked<[[Int]]>([])
        let leaders = PutGroup.leaderLimit
        let outcomes = Locked<[Int: Bool]>([:])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in 0 ..< leaders + 6 {
                tasks.addTask {
                    let stored = (try? await onThread {
                        try group.submit(Self.member(index, size: 100)) { members in
                            let ids = members.map { Int($0.logicalSize) }
                            let busy = groups.withLock { $0.append(ids); return $0.count <= leaders }
                            if busy {
                                started.signal()
                                release.wait()
                            }
                            if ids.contains(100 + leaders + 1) { throw StoreError(code: .unavailable, message: "refused for the test") }
                            // One member left without a row, the rest of its group stored.
                            let lost = members.filter { $0.logicalSize == 100 + leaders + 3 }
                            return Dictionary(uniqueKeysWithValues: lost.map { ($0.digest, StoreError(code: .unavailable, message: "lost for the test")) })
                        }
                    }) != nil
                    outcomes.withLock { $0[index] = stored }
                }
                if index < leaders { await wait(for: started) }
            }
            try await until { group.queued == 6 }
            release.signal()
            try await until { groups.withLock { $0.count } == leaders + 3 }
            for _ in 1 ..< leaders { release.signal() }
            try await tasks.waitForAll()
        }
        let formed = groups.withLock { $0 }
        // 100-byte members, 250 bytes a group: the queued six form three groups of two.
        #expect(formed.dropFirst(leaders).map(\.count) == [2, 2, 2])
        let failed = try #require(formed.first { $0.contains(100 + leaders + 1) })
        for (index, stored) in outcomes.withLock({ $0 }) {
            #expect(stored == !(failed.contains(100 + index) || index == leaders + 3), "member \(index)")
        }
    }

    /// Many threads putting small (inline) and large (packed) blobs, the same ones repeatedly: each
    /// put returns its digest and reads back, each digest has one row, every pack is live, and the
    /// counts are exact once a record references them all.
    @Test(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
    func concurrentSmallAndPackedPutsAreStoredOnceEach() async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        let cluster = environment.configuration(database: url)
        defer { Task { await environment.dropDatabase(url) } }
        let store = try await Store(cluster: cluster, configuration: StoreLocation.configuration)
        defer { try? store.close() }
        // 20 small text blobs (inline) and 20 of 100 KiB random bytes (over the inline limit).
        let blobs: [Data] = (0 ..< 40).map { index in
            index < 20 ? Data(String(repeating: "blob \(index) ", count: 50).utf8) : EngineContractTests.randomData(100 << 10)
        }
        let returned = Locked<[Int: Digest]>([:])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for thread in 0 ..< 8 {
                tasks.addTask {
                    try await onThread {
                        for step in 0 ..< 30 {
                            let index = (thread * 7 + step * 13) % blobs.count
                            let digest = try store.put(blobs[index])
                            returned.withLock { $0[index] = digest }
                        }
                    }
                }
            }
            try await tasks.waitForAll()
        }
        let digests = returned.withLock { $0 }
        #expect(digests.count == blobs.count)
        for (index, digest) in digests {
            #expect(digest == Digest.sha256(blobs[index]))
            #expect(try await onThread { try store.get(digest) } == blobs[index])
        }
        try await environment.withClient(url) { client in
            let query: PostgresQuery = """
                SELECT count(*), count(inline_data), count(pack_id), \
                (SELECT count(*) FROM contentstore.packs WHERE state <> 1) FROM contentstore.blobs
                """
            for try await (rows, inline, packed, notLive) in try await client.query(query).decode((Int64, Int64, Int64, Int64).self) {
                #expect(rows == 40 && inline == 20 && packed == 20 && notLive == 0)
            }
        }
        let all = Array(digests.values)
        try await onThread { try store.write { try $0.setRecord(Record(references: all), forKey: "all") } }
        for digest in all { #expect(store.refCount(of: digest) == 1) }
        #expect(try await onThread { try store.verify(VerificationOptions(readData: true)) }.isClean)
    }

    private static func member(_ index: Int, size: Int) -> PutGroup.Member {
        let bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: size)
        return PutGroup.Member(digest: Digest.sha256(bytes + [UInt8(truncatingIfNeeded: index >> 8)]), logicalSize: 100 + index,
                               codec: .raw, stored: bytes)
    }
}

/// Shared state of a test's threads.
private final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { value.withLock { body(&$0) } }
}

/// Polls `condition` until it holds (60 s at most).
private func until(_ condition: () -> Bool) async throws {
    struct NotYet: Error {}
    try await eventually { if !condition() { throw NotYet() } }
}

/// Waits for `semaphore` off the cooperative pool.
private func wait(for semaphore: DispatchSemaphore) async {
    _ = try? await onThread { semaphore.wait() }
}
