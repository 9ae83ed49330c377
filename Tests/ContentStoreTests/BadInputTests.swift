import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Rule 6: bad input gets a clear error and changes nothing.
@Suite(.blocking) struct BadInputTests {
    enum BadKey: String, CaseIterable, Sendable {
        /// `withNUL` is a small string (stored inline), `withNULAfterALongRun` a native one on the heap.
        case empty, tooLong, withNUL, withNULAfterALongRun
        var key: String {
            switch self {
            case .empty: ""
            case .tooLong: String(repeating: "k", count: Store.Limits().maximumKeyLength + 1)
            case .withNUL: "a\0b"
            case .withNULAfterALongRun: String(repeating: "é", count: 40) + "\0"
            }
        }
        var code: StoreError.Code { self == .tooLong ? .limitExceeded : .invalidArgument }
    }

    @Test(arguments: BadKey.allCases)
    func badKeysAreRefusedEverywhere(bad: BadKey) throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let before = try store.statistics()
        #expect(throws: StoreError.code(bad.code)) { try store.write { try $0.setRecord(Record(), forKey: bad.key) } }
        #expect(throws: StoreError.code(bad.code)) { try store.write { try $0.removeRecord(forKey: bad.key) } }
        #expect(throws: StoreError.code(bad.code)) { try store.record(forKey: bad.key) }
        #expect(try store.statistics() == before)
        #expect(try store.keys(withPrefix: "").isEmpty)
    }

    @Test func longestKeyIsAccepted() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let key = String(repeating: "é", count: Store.Limits().maximumKeyLength / 2)
        try store.write { try $0.setRecord(Record(), forKey: key) }
        try store.close()
        #expect(try Store(at: dir.store, configuration: .testing()).keys(withPrefix: "") == [key])
    }

    @Test func valueOverTheLimitIsRefused() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.limits.maximumValueLength = 1000
        let store = try Store(at: dir.store, configuration: configuration)
        let error = try #require(throws: StoreError.self) {
            try store.write { try $0.setRecord(Record(value: Data(count: 1001)), forKey: "big") }
        }
        #expect(error.code == .limitExceeded)
        #expect(error.message.contains("big"))
        try store.write { try $0.setRecord(Record(value: Data(count: 1000)), forKey: "fits") }
        #expect(try store.keys(withPrefix: "") == ["fits"])
    }

    @Test func oversizedBlobIsRefused() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.limits.maximumBlobSize = 100
        let store = try Store(at: dir.store, configuration: configuration)
        #expect(throws: StoreError.code(.limitExceeded)) { try store.put(Data(count: 101)) }
        #expect(try store.statistics().blobCount == 0)
    }

    @Test func aDirectoryThatIsNotAStoreIsRefusedAndLeftAlone() throws {
        let dir = TemporaryDirectory()
        let other = dir.url.appendingPathComponent("photos")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        try Data("holiday".utf8).write(to: other.appendingPathComponent("a.jpg"))
        let error = try #require(throws: StoreError.self) { try Store(at: other) }
        #expect(error.code == .unsupportedFormat)
        #expect(error.message.contains(other.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: other.path) == ["a.jpg"])

        let file = dir.url.appendingPathComponent("plain-file")
        try Data("x".utf8).write(to: file)
        #expect(throws: StoreError.code(.unsupportedFormat)) { try Store(at: file) }
    }

    @Test func aNewerFormatVersionIsRefused() throws {
        let dir = TemporaryDirectory()
        try Store(at: dir.store).close()
        var writer = ByteWriter()
        writer.append(contentsOf: FormatFile.magic)
        writer.append(UInt32(FormatFile.version + 1))
        writer.append(UInt32(0))
        writer.append(CRC32C.checksum(writer.bytes))
        try Data(writer.bytes).write(to: dir.store.appendingPathComponent("FORMAT"))
        let error = try #require(throws: StoreError.self) { try Store(at: dir.store) }
        #expect(error.code == .unsupportedFormat)
        #expect(error.message.contains("version 2"))
    }

    @Test func aSecondOpenerIsLockedOutWithThePid() throws {
        let dir = TemporaryDirectory()
        let first = try Store(at: dir.store)
        let error = try #require(throws: StoreError.self) { try Store(at: dir.store) }
        #expect(error.code == .locked)
        #expect(error.message.contains("process \(ProcessInfo.processInfo.processIdentifier)"))
        try first.close()
        try Store(at: dir.store).close()  // free again once closed
    }

    @Test func aClosedStoreRefusesEverything() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store)
        let digest = try store.put(Data("x".utf8))
        try store.close()
        #expect(throws: StoreError.code(.closed)) { try store.put(Data("y".utf8)) }
        #expect(throws: StoreError.code(.closed)) { try store.get(digest) }
        #expect(throws: StoreError.code(.closed)) { try store.write { try $0.setRecord(Record(), forKey: "k") } }
        #expect(throws: StoreError.code(.closed)) { try store.collectGarbage() }
        #expect(!store.contains(digest))
    }

    @Test func invalidConfigurationIsRefused() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.compressionLevel = 0
        #expect(throws: StoreError.code(.invalidArgument)) { try Store(at: dir.store, configuration: configuration) }
        #expect(!FileManager.default.fileExists(atPath: dir.store.path))
    }

    @Test func errorsDescribeThemselves() {
        let error = StoreError(code: .corrupted, message: "bad bytes", path: "/x", offset: 7, cause: SystemError("pread", errno: 5))
        #expect(error.description.hasPrefix("corrupted: bad bytes"))
        #expect(error.description.contains("pread"))
        #expect(error == StoreError(code: .corrupted, message: "other"))
        #expect(error != StoreError(code: .io, message: "bad bytes"))
    }
}
