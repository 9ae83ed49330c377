import Foundation
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct SmokeTests {
    @Test func roundTripAcrossReopen() throws {
        let dir = TemporaryDirectory()
        let digest: Digest
        do {
            let store = try Store(at: dir.store)
            digest = try store.put(Data("hello".utf8))
            try store.write { tx in try tx.setRecord(Record(value: Data("v".utf8), references: [digest]), forKey: "a") }
            #expect(store.refCount(of: digest) == 1)
            try store.close()
        }
        let store = try Store(at: dir.store)
        #expect(try store.get(digest) == Data("hello".utf8))
        #expect(try store.record(forKey: "a")?.references == [digest])
        #expect(store.refCount(of: digest) == 1)
        try store.checkpoint()
        try store.close()
        let again = try Store(at: dir.store)
        #expect(try again.get(digest) == Data("hello".utf8))
        #expect(again.refCount(of: digest) == 1)
        #expect(try again.verify(.init(readData: true)).isClean)
    }
}
