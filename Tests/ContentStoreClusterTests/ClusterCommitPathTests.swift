import ContentStore
@testable import ContentStoreCluster
import Foundation
import Testing

/// The two group transactions (Docs/cluster.md §5.2.1): groups of blind writes and of
/// read-modify-writes of the written keys run at READ COMMITTED with their rows locked; groups with
/// any other read stay SERIALIZABLE. Both kinds, from two instances, on the same keys at once: no
/// increment is lost, and every count equals the references the records hold.
@Suite(.enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterCommitPathTests {
    @Test func membersReadingOnlyWhatTheyWriteTakeTheLockingPath() {
        let record = Record(value: Data("v".utf8))
        let blind = CommitQueue.Member(reads: ReadSet(), changes: [("a", record), ("b", nil)])
        #expect(blind.readsOnlyItsWrites)
        let increment = CommitQueue.Member(reads: ReadSet(points: ["a": 7]), changes: [("a", record)])
        #expect(increment.readsOnlyItsWrites)
        let absentThenWritten = CommitQueue.Member(reads: ReadSet(points: ["a": Int64?.none]), changes: [("a", record)])
        #expect(absentThenWritten.readsOnlyItsWrites)
        let readsAnother = CommitQueue.Member(reads: ReadSet(points: ["a": 7, "other": 3]), changes: [("a", record)])
        #expect(!readsAnother.readsOnlyItsWrites)
        let listsAPrefix = CommitQueue.Member(reads: ReadSet(prefixes: ["a": []]), changes: [("a", record)])
        #expect(!listsAPrefix.readsOnlyItsWrites)
    }

    @Test func blindAndReadModifyWriteWritersOfTheSameKeysLoseNothing() async throws {
        try await withStore(.cluster) { first, location in
            let second = try await location.open()
            defer { try? second.close() }
            var stored: [Digest] = []
            for index in 0 ..< 4 { stored.append(try await first.put(Data("blob \(index)".utf8))) }
            let blobs = stored
            let rounds = 30
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, store) in [first, second, first, second].enumerated() {
                    // Blind writers (READ COMMITTED groups): rewrite and remove the shared keys,
                    // each version referencing other blobs, so every group changes counts.
                    group.addTask { try await onThread {
                        for round in 0 ..< rounds {
                            let key = "shared/\(round % 3)"
                            if round % 7 == 6 {
                                try store.write { try $0.removeRecord(forKey: key) }
                            } else {
                                let references = [blobs[(index + round) % 4], blobs[round % 4]]
                                try store.write { try $0.setRecord(Record(value: Data("\(index) \(round)".utf8), references: references), forKey: key) }
                            }
                        }
                    } }
                    // Read-modify-write of the written key alone (READ COMMITTED, rows locked).
                    group.addTask { try await onThread {
                        for _ in 0 ..< rounds { try EngineContractTests.increment(store, key: "counter") }
                    } }
                    // Read-modify-write that also reads other keys (SERIALIZABLE), on the same
                    // counter and the same shared keys.
                    group.addTask { try await onThread {
                        for round in 0 ..< rounds {
                            try store.write { transaction in
                                let shared = try transaction.keys(withPrefix: "shared/")
                                let current = try transaction.record(forKey: "counter").map { Int(String(decoding: $0.value, as: UTF8.self))! } ?? 0
                                try transaction.setRecord(Record(value: Data(String(current + 1).utf8)), forKey: "counter")
                                try transaction.setRecord(Record(value: Data("\(shared.count)".utf8), references: [blobs[round % 4]]),
                                                          forKey: "shared/\(round % 3)")
                            }
                        }
                    } }
                }
                try await group.waitForAll()
            }
            #expect(try EngineContractTests.counter(first, key: "counter") == 4 * rounds * 2)
            var expected: [Digest: Int] = [:]
            for key in try await second.keys(withPrefix: "shared/") {
                for digest in try #require(try await second.record(forKey: key)).references { expected[digest, default: 0] += 1 }
            }
            for digest in blobs {
                #expect(first.refCount(of: digest) == expected[digest, default: 0], "\(digest)")
            }
            #expect(try await first.verify().isClean)
        }
    }
}
