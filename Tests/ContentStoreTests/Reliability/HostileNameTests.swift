import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Hostile names: record keys that look like paths never become paths, and files whose names only
/// resemble the store's own (another spelling of a segment, pack or checkpoint number) are never
/// taken for them.
extension Reliability {
    @Suite("Reliability: hostile keys and file names", .blocking)
    struct HostileNameTests {
        static let pathLikeKeys = [
            "../escape", "../../etc/passwd", "/absolute", "./dot", ".", "..", "a/../../b", "dir/", "//", "~", "~/x",
            "wal/0000000000000002.log", "packs/00000002.pack", "checkpoint/0000000000000002.ckpt", "LOCK", "FORMAT", "FORMAT.tmp",
            "%2e%2e%2f", "..\\..\\windows", "\u{202E}gnp.exe", "line\nbreak", "tab\there", "caf\u{00E9}", "cafe\u{0301}",
        ]

        /// Every path below `url`, relative to it.
        static func tree(_ url: URL) throws -> Set<String> {
            let enumerator = try #require(FileManager.default.enumerator(atPath: url.path))
            return Set(enumerator.compactMap { $0 as? String })
        }

        /// Keys are records in the log, never file names: path-like keys round-trip and leave no file
        /// but the store's own. (Keys are Swift strings: "café" spelt composed and decomposed is one
        /// key, as in a `Dictionary`, which is what `expected` is.)
        @Test func keysThatLookLikePathsAreOnlyRecords() throws {
            let dir = TemporaryDirectory()
            let store = try Store(at: dir.store)
            var expected: [String: Record] = [:]
            for (index, key) in Self.pathLikeKeys.enumerated() {
                let digest = try store.put(Data("blob \(index)".utf8))
                expected[key] = Record(value: Data(key.utf8), references: [digest])
                try store.write { try $0.setRecord(expected[key]!, forKey: key) }
            }
            try store.checkpoint()
            try store.close()

            let reopened = try Store(at: dir.store)
            #expect(try allRecords(reopened) == expected)
            #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
            try reopened.close()
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == ["store"])
            let own = /(LOCK|FORMAT|wal|packs|checkpoint|wal\/[0-9a-f]{16}\.log|packs\/[0-9a-f]{8}\.pack|checkpoint\/[0-9a-f]{16}\.ckpt)/
            for path in try Self.tree(dir.store) {
                #expect(path.wholeMatch(of: own) != nil, "the store made \(path)")
            }
        }

        /// A store with records in two packs, two WAL segments and a checkpoint, closed.
        func makeStore(_ dir: TemporaryDirectory) throws -> [String: Record] {
            var configuration = Store.Configuration()
            configuration.packSizeTarget = 64 * 1024
            configuration.walSegmentSize = 64 * 1024
            let store = try Store(at: dir.store, configuration: configuration)
            var random = SeededRandom(seed: 3)
            for index in 0 ..< 8 {
                if index == 4 { try store.checkpoint() }
                let digest = try store.put(random.bytes(24000))
                try store.write { try $0.setRecord(Record(value: Data([UInt8(index)]), references: [digest]), forKey: "k\(index)") }
            }
            let records = try allRecords(store)
            try store.close()
            return records
        }

        /// Defect: names were parsed leniently (`UInt64(_:radix:)` takes a sign and either case), so
        /// "+0000001.pack" or "0000000A.pack" was taken for a pack the store had under its own
        /// name: opened in its place (reads of that pack's blobs went to the stranger) or, in `wal/`,
        /// counted as a second segment with the same number (the store refused to open). Only the
        /// names the store writes are its files now; others are left alone.
        @Test(arguments: [
            "packs/+0000001.pack", "packs/-0000001.pack", "packs/0000000A.pack", "packs/00000001.pack.tmp",
            "wal/+000000000000001.log", "wal/000000000000000A.log", "wal/0x00000000000001.log",
            "checkpoint/+000000000000002.ckpt", "checkpoint/FFFFFFFFFFFFFFFF.ckpt",
        ])
        func fileNamesThatOnlyResembleTheStoresAreLeftAlone(_ name: String) throws {
            let dir = TemporaryDirectory()
            let records = try makeStore(dir)
            let stranger = dir.store.appendingPathComponent(name)
            let contents = Data("not the store's \(name)".utf8)
            try contents.write(to: stranger)

            let store = try Store(at: dir.store)
            #expect(try allRecords(store) == records)
            for record in records.values {
                for digest in record.references { _ = try store.get(digest) }
            }
            #expect(try store.verify(VerificationOptions(readData: true)).isClean)
            try store.checkpoint()
            _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: nil))
            try store.close()
            #expect(try Data(contentsOf: stranger) == contents)
        }

        /// Defect: a checkpoint (checksums intact) naming the last segment number there can be made
        /// the next rotation overflow the number and trap the process. The store now refuses it at
        /// open as `corrupted`: no store numbers segments anywhere near it.
        @Test func aCheckpointNamingTheLastPossibleSegmentIsCorruptionNotATrap() throws {
            let dir = TemporaryDirectory()
            _ = try makeStore(dir)
            let checkpoints = dir.store.appendingPathComponent("checkpoint")
            let fileSystem = FileSystem(io: SystemFileIO())
            let file = try #require(try files(in: checkpoints, withExtension: "ckpt").last)
            var contents = try Checkpoint.load(path: file.path, limits: Store.Limits(), fileSystem: fileSystem)
            contents.firstSegment = .max
            try Checkpoint.write(contents, directory: checkpoints.path, fileSystem: fileSystem)

            let error = #expect(throws: StoreError.self) { try Store(at: dir.store) }
            #expect(error?.code == .corrupted, "\(String(describing: error))")
            #expect(error?.path?.contains("checkpoint") == true, "\(String(describing: error))")
        }
    }
}
