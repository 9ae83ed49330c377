import Foundation
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct RecoveryTests {
    /// Frames of a WAL segment: (offset, end, kind).
    func frames(of segment: URL) throws -> [(offset: Int, end: Int, kind: UInt8)] {
        let bytes = try Data(contentsOf: segment)
        return try bytes.withUnsafeBytes { raw in
            let header = try #require(WALFormat.parseHeader(raw))
            var result: [(Int, Int, UInt8)] = []
            var offset = WALFormat.headerSize
            while let frame = WALFormat.frame(in: raw, at: offset, salt: header.salt, maximumPayload: 1 << 20) {
                let end = offset + WALFormat.frameHeaderSize + frame.payload.count
                result.append((offset, end, frame.kind))
                offset = end
            }
            #expect(offset == raw.count)
            return result
        }
    }

    /// A store with `commits` durable single-record commits; returns the records after each commit.
    func makeStore(at url: URL, commits: Int) throws -> [[String: Record]] {
        let store = try Store(at: url, configuration: .testing(durability: .full))
        var states: [[String: Record]] = [[:]]
        var current: [String: Record] = [:]
        for i in 0 ..< commits {
            let record = Record(value: Data("value \(i)".utf8))
            try store.write { tx in
                try tx.setRecord(record, forKey: "k\(i % 4)")
                if i % 3 == 2 { try tx.removeRecord(forKey: "k\((i + 1) % 4)") }
            }
            current["k\(i % 4)"] = record
            if i % 3 == 2 { current["k\((i + 1) % 4)"] = nil }
            states.append(current)
        }
        try store.close()
        return states
    }

    @Test func truncatingTheLogAnywhereInItsLastThreeRecordsOpensToACommittedPrefix() throws {
        let dir = TemporaryDirectory()
        let states = try makeStore(at: dir.store, commits: 10)
        let segment = try #require(try files(in: dir.store.appendingPathComponent("wal"), withExtension: "log").last)
        let commitFrames = try frames(of: segment).filter { $0.kind == LogRecord.Kind.commit.rawValue }
        #expect(commitFrames.count == 10)
        let start = commitFrames[commitFrames.count - 3].offset
        let length = try Data(contentsOf: segment).count
        let copy = dir.url.appendingPathComponent("copy")
        for cut in start ... length {
            try copyDirectory(dir.store, to: copy)
            let copiedSegment = copy.appendingPathComponent("wal").appendingPathComponent(segment.lastPathComponent)
            let handle = try FileHandle(forWritingTo: copiedSegment)
            try handle.truncate(atOffset: UInt64(cut))
            try handle.close()
            let committed = commitFrames.filter { $0.end <= cut }.count
            let store = try Store(at: copy, configuration: .testing())
            #expect(try allRecords(store) == states[committed], "cut at \(cut)")
            // The torn tail is gone for good: writing after recovery and reopening keeps both.
            try store.write { try $0.setRecord(Record(value: Data("after".utf8)), forKey: "after") }
            try store.close()
            let again = try Store(at: copy, configuration: .testing())
            var expected = states[committed]
            expected["after"] = Record(value: Data("after".utf8))
            #expect(try allRecords(again) == expected, "reopen after cut at \(cut)")
            try again.close()
        }
    }

    @Test func aFlippedBitInAnEarlierLogRecordIsCorruptionNamingFileAndOffset() throws {
        let dir = TemporaryDirectory()
        _ = try makeStore(at: dir.store, commits: 10)
        let segment = try #require(try files(in: dir.store.appendingPathComponent("wal"), withExtension: "log").last)
        let target = try frames(of: segment).filter { $0.kind == LogRecord.Kind.commit.rawValue }[4]
        try flipBit(in: segment, at: target.offset + WALFormat.frameHeaderSize + 2)
        let error = try #require(throws: StoreError.self) { try Store(at: dir.store, configuration: .testing()) }
        #expect(error.code == .corrupted)
        #expect(error.path == segment.path)
        #expect(error.offset == UInt64(target.offset))
        #expect(error.message.contains(segment.path))
    }

    @Test(arguments: [0, 20, 45, 60, -20, -5])
    func aFlippedBitInTheCheckpointIsCorruption(position: Int) throws {
        let dir = TemporaryDirectory()
        do {
            let store = try Store(at: dir.store, configuration: .testing())
            for i in 0 ..< 20 {
                let digest = try store.put(Data("blob \(i)".utf8))
                try store.write { try $0.setRecord(Record(value: Data("v\(i)".utf8), references: [digest]), forKey: "k\(i)") }
            }
            try store.checkpoint()
            try store.close()
        }
        let checkpoint = try #require(try files(in: dir.store.appendingPathComponent("checkpoint"), withExtension: "ckpt").last)
        let size = try Data(contentsOf: checkpoint).count
        try flipBit(in: checkpoint, at: position >= 0 ? position : size + position, bit: 5)
        let error = try #require(throws: StoreError.self) { try Store(at: dir.store, configuration: .testing()) }
        #expect(error.code == .corrupted)
        #expect(error.path == checkpoint.path)
    }

    @Test func aTornNewestSegmentHeaderIsRecovered() throws {
        let dir = TemporaryDirectory()
        let states = try makeStore(at: dir.store, commits: 3)
        // A crash right after creating the next segment, before its header reached the disk.
        let next = dir.store.appendingPathComponent("wal").appendingPathComponent(WALFormat.fileName(2))
        try Data(count: 7).write(to: next)
        let store = try Store(at: dir.store, configuration: .testing())
        #expect(try allRecords(store) == states[3])
        try store.write { try $0.setRecord(Record(), forKey: "z") }
        try store.close()
        #expect(try allRecords(try Store(at: dir.store, configuration: .testing())).count == states[3].count + 1)
    }

    @Test func aMissingSegmentInTheMiddleIsCorruption() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.walSegmentSize = 1 << 16
        configuration.checkpointThreshold = .max
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            for i in 0 ..< 2000 { try store.write { try $0.setRecord(Record(value: Data(count: 100)), forKey: "k\(i)") } }
            try store.close()
        }
        let segments = try files(in: dir.store.appendingPathComponent("wal"), withExtension: "log")
        #expect(segments.count >= 3)
        try FileManager.default.removeItem(at: segments[1])
        let error = try #require(throws: StoreError.self) { try Store(at: dir.store, configuration: configuration) }
        #expect(error.code == .corrupted)
        #expect(error.message.contains(segments[1].lastPathComponent))
    }

    @Test func replayAcrossSegmentsAndCheckpointsKeepsEverything() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.walSegmentSize = 1 << 16
        var expected: [String: Record] = [:]
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            for i in 0 ..< 1500 {
                let digest = try store.put(Data("b\(i % 100)".utf8))
                let record = Record(value: Data(count: i % 90), references: [digest])
                try store.write { try $0.setRecord(record, forKey: "k\(i % 700)") }
                expected["k\(i % 700)"] = record
                if i == 700 { try store.checkpoint() }
            }
            try store.close()
        }
        let reopened = try Store(at: dir.store, configuration: configuration)
        #expect(try allRecords(reopened) == expected)
        #expect(try reopened.verify(.init(readData: true)).isClean)
    }
}
