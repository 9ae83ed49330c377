import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct ConcurrencyTests {
    @Test(arguments: [Store.Durability.none, .full])
    func eightThreadsPuttingAndCommittingMatchTheSerialModel(durability: Store.Durability) throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: durability))
        let shared = try (0 ..< 4).map { try store.put(Data("shared \($0)".utf8)) }
        let threads = 8
        let perThread = 150
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var random = SeededRandom(seed: UInt64(thread))
            do {
                for i in 0 ..< perThread {
                    let own = try store.put(random.bytes(Int(random.next() % 2000)))
                    let references = [own, shared[i % shared.count]]
                    try store.write { tx in
                        try tx.setRecord(Record(value: Data("\(thread)/\(i)".utf8), references: references), forKey: "t\(thread)/\(i % 50)")
                        if i % 7 == 0 { try tx.removeRecord(forKey: "t\(thread)/\((i + 25) % 50)") }
                    }
                    _ = try store.get(own)
                }
            } catch {
                failures.withLock { $0.append("thread \(thread): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        // The serial model: each thread's final records, replayed in order.
        var expected: [String: Record] = [:]
        for thread in 0 ..< threads {
            var random = SeededRandom(seed: UInt64(thread))
            for i in 0 ..< perThread {
                let own = Digest.sha256(random.bytes(Int(random.next() % 2000)))
                expected["t\(thread)/\(i % 50)"] = Record(value: Data("\(thread)/\(i)".utf8), references: [own, shared[i % shared.count]])
                if i % 7 == 0 { expected["t\(thread)/\((i + 25) % 50)"] = nil }
            }
        }
        #expect(try allRecords(store) == expected)
        var counts: [Digest: Int] = [:]
        for record in expected.values { for digest in record.references { counts[digest, default: 0] += 1 } }
        for (digest, count) in counts { #expect(store.refCount(of: digest) == count) }
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(try allRecords(reopened) == expected)
        #expect(try reopened.verify().isClean)
    }

    @Test func readersSeeOnlyWholeCommits() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let done = Atomic<Bool>(false)
        let torn = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                for i in 0 ..< 400 {
                    try? store.write { tx in
                        try tx.setRecord(Record(value: Data("\(i)".utf8)), forKey: "a")
                        try tx.setRecord(Record(value: Data("\(i)".utf8)), forKey: "b")
                    }
                }
                done.store(true, ordering: .releasing)
            } else {
                while !done.load(ordering: .acquiring) {
                    let pair = try? store.read { snapshot in (try snapshot.record(forKey: "a"), try snapshot.record(forKey: "b")) }
                    if let pair, pair.0 != pair.1 { torn.add(1, ordering: .relaxed) }
                }
            }
        }
        #expect(torn.load(ordering: .relaxed) == 0)
    }
}
