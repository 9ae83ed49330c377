#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Store directories are 0700 and files 0600 (not widened by the umask's usual 022), and the store
/// never follows a symlink out of its directory: a symlink where a store directory or file belongs
/// makes the open fail, and what it points at is left untouched.
extension Reliability {
    @Suite("Reliability: permissions and symlinks", .blocking)
    struct PermissionTests {
        static func mode(_ path: String) -> mode_t {
            var info = stat()
            return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
        }

        /// Every directory and file of a store that has committed, checkpointed and collected.
        @Test func storeDirectoriesAre0700AndFiles0600() throws {
            let dir = TemporaryDirectory()
            let clock = TestClock()
            var configuration = Store.Configuration()
            configuration.packSizeTarget = 64 * 1024
            configuration.now = { clock.now }
            let url = dir.url.appendingPathComponent("made/by/the/store")
            let store = try Store(at: url, configuration: configuration)
            var random = SeededRandom(seed: 1)
            for i in 0 ..< 30 {
                let digest = try store.put(random.bytes(5000))
                if i % 2 == 0 { try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k\(i)") } }
            }
            try store.checkpoint()
            clock.advance(by: 7200)
            _ = try store.collectGarbage()
            try store.close()

            var checked = 0
            for level in ["made", "made/by", "made/by/the"] {
                #expect(Self.mode(dir.url.appendingPathComponent(level).path) == 0o700, "\(level)")
            }
            #expect(Self.mode(url.path) == 0o700)
            let enumerator = try #require(FileManager.default.enumerator(atPath: url.path))
            for case let relative as String in enumerator {
                let path = url.path + "/" + relative
                var isDirectory: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
                #expect(Self.mode(path) == (isDirectory.boolValue ? 0o700 : 0o600), "\(relative) is \(String(Self.mode(path), radix: 8))")
                checked += 1
            }
            #expect(checked >= 8)  // FORMAT, LOCK, 3 directories, a segment, a checkpoint, packs
        }

        /// What a symlink points at: a directory or a file outside the store, with known contents.
        struct Outside {
            let directory: URL
            let file: URL
            static let contents = Data("outside the store".utf8)

            init(in dir: TemporaryDirectory) throws {
                directory = dir.url.appendingPathComponent("outside", isDirectory: true)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                file = dir.url.appendingPathComponent("outside-file")
                try Outside.contents.write(to: file)
            }

            func expectUntouched(_ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [], "\(label)", sourceLocation: sourceLocation)
                #expect(try Data(contentsOf: file) == Outside.contents, "\(label)", sourceLocation: sourceLocation)
            }
        }

        /// A store with a commit, closed.
        func makeStore(_ dir: TemporaryDirectory) throws {
            let store = try Store(at: dir.store)
            let digest = try store.put(Data("blob".utf8))
            try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k") }
            try store.checkpoint()
            try store.write { try $0.setRecord(Record(value: Data("2".utf8)), forKey: "k2") }
            try store.close()
        }

        @Test(arguments: ["wal", "packs", "checkpoint"])
        func aStoreDirectoryThatIsASymlinkIsRefused(_ name: String) throws {
            let dir = TemporaryDirectory()
            let outside = try Outside(in: dir)
            // A new store whose subdirectory is planted before it is created...
            try FileManager.default.createDirectory(at: dir.store, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: dir.store.appendingPathComponent(name), withDestinationURL: outside.directory)
            #expect(throws: StoreError.self) { try Store(at: dir.store) }
            try outside.expectUntouched("new store, \(name) planted")
            // ...and an existing store whose subdirectory is replaced by a link to a copy of itself.
            let other = TemporaryDirectory()
            try makeStore(other)
            let moved = outside.directory.deletingLastPathComponent().appendingPathComponent("moved-\(name)")
            try FileManager.default.moveItem(at: other.store.appendingPathComponent(name), to: moved)
            try FileManager.default.createSymbolicLink(at: other.store.appendingPathComponent(name), withDestinationURL: moved)
            let before = try FileManager.default.contentsOfDirectory(atPath: moved.path).sorted()
            let error = #expect(throws: StoreError.self) { try Store(at: other.store) }
            #expect(error?.message.contains(name) == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: moved.path).sorted() == before)
        }

        @Test(arguments: ["LOCK", "FORMAT", "FORMAT.tmp"])
        func aStoreFileThatIsASymlinkIsRefusedAndItsTargetUntouched(_ name: String) throws {
            let dir = TemporaryDirectory()
            let outside = try Outside(in: dir)
            if name == "FORMAT.tmp" {
                // Planted in a directory about to become a store.
                try FileManager.default.createDirectory(at: dir.store, withIntermediateDirectories: true)
            } else {
                try makeStore(dir)
                try FileManager.default.removeItem(at: dir.store.appendingPathComponent(name))
            }
            try FileManager.default.createSymbolicLink(at: dir.store.appendingPathComponent(name), withDestinationURL: outside.file)
            #expect(throws: StoreError.self) { try Store(at: dir.store) }
            try outside.expectUntouched(name)
        }

        /// A symlink planted among the segments, packs or checkpoints, named like one of them.
        @Test(arguments: ["wal/0000000000000003.log", "packs/00000009.pack", "checkpoint/0000000000000009.ckpt"])
        func aSymlinkAmongTheStoresFilesIsRefusedAndItsTargetUntouched(_ name: String) throws {
            let dir = TemporaryDirectory()
            let outside = try Outside(in: dir)
            try makeStore(dir)
            try FileManager.default.createSymbolicLink(at: dir.store.appendingPathComponent(name), withDestinationURL: outside.file)
            let error = #expect(throws: StoreError.self) { try Store(at: dir.store) }
            #expect((error?.cause as? SystemError)?.errno == ELOOP, "\(String(describing: error))")
            try outside.expectUntouched(name)
        }

        /// The path given for the store, when it is itself a symlink, is refused rather than followed.
        @Test func aStorePathThatIsASymlinkIsRefused() throws {
            let dir = TemporaryDirectory()
            let outside = try Outside(in: dir)
            let link = dir.url.appendingPathComponent("link")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside.directory)
            let error = #expect(throws: StoreError.self) { try Store(at: link) }
            #expect(error?.code == .unsupportedFormat)
            try outside.expectUntouched("store path")
        }
    }
}
