import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing
import TestThreads

/// Keys are arbitrary non-empty strings with no filesystem meaning.
@Suite struct KeyTests {
    let directory = TemporaryDirectory()

    static let hostileKeys: [String] = [
        "../x", "../../etc/passwd", "a/b", "a", "a/", "/", ".", "..", "~", " ", "with space", "tab\there",
        "line\nbreak", "nul\u{0}inside", "\u{0}", "\u{1}", "\u{1}0", "esc\u{1}1aped", "back\\slash", "*?[]",
        "🙂", "👩‍👩‍👧‍👦 family", "日本語のキー", "é", "dataarchive/nested", "0.dat", "CON", "a:b",
        String(repeating: "k", count: 4096),
        String(repeating: "🙂", count: 1024),   // 4 KiB of 4-byte scalars
        String(repeating: "m", count: DataArchive.maximumKeyLength),
    ]

    @Test func hostileKeysRoundTripAndStayDistinct() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        for (index, key) in Self.hostileKeys.enumerated() {
            #expect(await archive.setAndWait(key, bytes("value \(index)")).isSuccess, "\(key.prefix(20))")
            #expect(await archive.archiveAndWait(key, bytes("newer \(index)")).isSuccess)
        }
        for (index, key) in Self.hostileKeys.enumerated() {
            let (versions, result) = await archive.getAllAndWait(key)
            #expect(result.isSuccess)
            #expect(versions.map(text) == ["newer \(index)", "value \(index)"], "\(key.prefix(20))")
            #expect(archive.numberOfArchives(key: key) == 1)
        }
        #expect(archive.keys == Self.hostileKeys.sorted())
        // Nothing was created outside the store directory.
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
        #expect(names == ["data_archive"])
        for key in Self.hostileKeys { archive.delete(key: key, completionHandler: nil) }
        #expect(archive.keys.isEmpty)
    }

    @Test func emptyAndOverLongKeysFailClearlyAndChangeNothing() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        #expect(await archive.setAndWait("present", bytes("p")).isSuccess)
        let overLong = String(repeating: "x", count: DataArchive.maximumKeyLength + 1)
        let overLongByEscapes = String(repeating: "\u{0}", count: DataArchive.maximumKeyLength / 2 + 1)
        for (key, code) in [("", StoreError.Code.invalidArgument), (overLong, .limitExceeded), (overLongByEscapes, .limitExceeded),
                            (String(repeating: "y", count: 100_000), .limitExceeded)] {
            for result in [
                await archive.setAndWait(key, bytes("v")),
                await archive.archiveAndWait(key, bytes("v")),
                await archive.keepAndWait(1, key),
                await archive.deleteAndWait(key),
                await archive.getAndWait(key).1,
                await archive.getAllAndWait(key).1,
                await result { archive.set(key: key, value: UnencodableValue(), completionHandler: $0) },
            ] {
                #expect(storeError(result)?.code == code, "\(result)")
            }
            #expect(await archive.readerAndWait(key) == nil)
            #expect(archive.numberOfArchives(key: key) == 0)
            await #expect(throws: StoreError(code: code, message: "")) { try await archive.set(bytes("v"), forKey: key) }
            await #expect(throws: StoreError(code: code, message: "")) { try await archive.data(forKey: key) }
            await #expect(throws: StoreError(code: code, message: "")) {
                for try await _ in archive.versions(forKey: key) {}
            }
        }
        #expect(archive.keys == ["present"])
        #expect(await archive.getAndWait("present").0 == bytes("p"))
    }

    @Test func keyEncodingRoundTrips() throws {
        for key in Self.hostileKeys {
            let recordKey = try KeyCoding.recordKey(for: key)
            #expect(recordKey.hasPrefix("dataarchive/"))
            #expect(!recordKey.utf8.contains(0))
            #expect(KeyCoding.key(forRecordKey: recordKey) == key)
        }
        #expect(try KeyCoding.recordKey(for: "plain") == "dataarchive/plain")
        #expect(try KeyCoding.recordKey(for: "a\u{0}b\u{1}c") == "dataarchive/a\u{1}0b\u{1}1c")
        // Record keys that are not DataArchive's are not keys.
        #expect(KeyCoding.key(forRecordKey: "warehouse/x") == nil)
        #expect(KeyCoding.key(forRecordKey: "dataarchive/") == nil)
        #expect(KeyCoding.key(forRecordKey: "dataarchive/bad\u{1}") == nil)
    }

    @Test func otherRecordsInTheStoreAreNotKeys() async throws {
        let store = try makeStore(directory)
        defer { try? store.close() }
        try await store.write { try $0.setRecord(Record(value: bytes("x")), forKey: "warehouse/project") }
        let archive = DataArchive(store: store)
        #expect(archive.keys.isEmpty)
        #expect(await archive.setAndWait("doc", bytes("d")).isSuccess)
        #expect(archive.keys == ["doc"])
        #expect(await archive.deleteAndWait("doc").isSuccess)
        #expect(try await store.record(forKey: "warehouse/project") == Record(value: bytes("x")))
    }

    @Test func resultURLsNameTheOriginalFiles() async throws {
        let archive = DataArchive(rootUrl: directory.url)
        let (_, missing) = await archive.getAllAndWait("a/b")
        guard case .fileNotFound(let url) = missing else {
            Issue.record("expected fileNotFound, got \(missing)")
            return
        }
        #expect(url.path == directory.url.appendingPathComponent("data_archive/a/b/0.dat").standardizedFileURL.path)
        // A version that does not convert is named by its original file number: archives count up from 1 (oldest).
        for version in ["{}", #"{"name":"A","age":1}"#, #"{"name":"B","age":2}"#] { archive.archiveCurrent(key: "p", andSetNewData: bytes(version)) }
        let (people, result) = await archive.getAllPeopleAndWait("p")
        #expect(people.map(\.age) == [2, 1])
        #expect(couldNotConvertFileURL(result)?.lastPathComponent == "1.dat")
    }
}

extension KeyTests {
    /// Keys compare as Swift strings: canonically equivalent spellings are one key.
    @Test func canonicallyEquivalentKeysAreOneKey() async {
        let archive = DataArchive(rootUrl: directory.url)
        #expect(await archive.setAndWait("caf\u{E9}", bytes("precomposed")).isSuccess)
        #expect(await archive.archiveAndWait("cafe\u{301}", bytes("decomposed")).isSuccess)
        #expect(await archive.getAllAndWait("caf\u{E9}").0.map(text) == ["decomposed", "precomposed"])
        #expect(archive.keys.count == 1)
    }

    /// `keys` waits only for what was called before it, even while other threads keep writing.
    @Test(.blocking) func keysDoesNotStarveUnderConcurrentWrites() async {
        let archive = DataArchive(rootUrl: directory.url)
        let stop = Atomic<Bool>(false)
        let writers = Countdown(4)
        for writer in 0 ..< 4 {
            Thread.detachNewThread {
                var index = 0
                while !stop.load(ordering: .relaxed) {
                    // Ten calls in flight at most: the callback API itself has no backpressure.
                    let batch = DispatchGroup()
                    for _ in 0 ..< 10 {
                        batch.enter()
                        archive.set(key: "w\(writer)-\(index % 50)", data: bytes("\(index)")) { _ in batch.leave() }
                        index += 1
                    }
                    batch.wait()
                }
                writers.tick()
            }
        }
        for round in 0 ..< 20 {
            archive.set(key: "mine-\(round)", data: bytes("x"))
            #expect(archive.keys.contains("mine-\(round)"))
        }
        stop.store(true, ordering: .relaxed)
        await writers.wait()
    }
}
