import Foundation
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// The power-cut model itself: the sweeps prove only what its images can show.
    @Suite("Reliability: power-cut model", .blocking)
    struct PowerCutModelTests {
        /// Names in the image's root, sorted.
        private func names(in image: URL) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: image.path).sorted()
        }

        private func create(_ path: String, on io: PowerCutFileIO) throws {
            let fd = try io.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600).get()
            io.close(fd)
        }

        /// A modelled disk whose root holds one file, its entry made durable by an `fsync` of the root.
        private func disk(holdingSynced name: String, in dir: ScratchDirectory) throws -> (PowerCutFileIO, URL) {
            let root = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let io = PowerCutFileIO(root: root)
            try create(root.path + "/" + name, on: io)
            let directory = try io.open(root.path, flags: O_RDONLY | O_DIRECTORY, mode: 0).get()
            defer { io.close(directory) }
            try io.fsync(directory).get()
            return (io, root)
        }

        /// A directory's unsynced changes are kept or lost each on its own: a create kept while a
        /// later unlink is lost (both names), the reverse (neither), and both ways in between. A
        /// model that kept or lost all of a directory's changes together showed only two of these.
        @Test func unsyncedDirectoryChangesAreKeptOrLostIndependently() throws {
            let dir = ScratchDirectory()
            let (io, root) = try disk(holdingSynced: "old", in: dir)
            // Unsynced from here: a create, then an unlink of the older name.
            try create(root.path + "/new", on: io)
            try io.unlink(root.path + "/old").get()

            var seen = Set<[String]>()
            for seed in 0 ..< 64 {
                var random = SeededRandom(seed: UInt64(seed))
                let image = dir.url.appendingPathComponent("image-\(seed)")
                let decisions = try io.writeImage(to: image, mode: .random, random: &random)
                #expect(decisions == 2, "two unsynced directory changes to decide")
                seen.insert(try names(in: image))
            }
            #expect(seen == [["old"], ["new"], ["new", "old"], []])

            var random = SeededRandom(seed: 0)
            let durable = dir.url.appendingPathComponent("durable")
            try io.writeImage(to: durable, mode: .durableOnly, random: &random)
            #expect(try names(in: durable) == ["old"])
            let everything = dir.url.appendingPathComponent("everything")
            try io.writeImage(to: everything, mode: .everything, random: &random)
            #expect(try names(in: everything) == ["new"])
        }

        /// A rename is one decision: the new name never appears without the old one going.
        @Test func aRenameIsKeptOrLostWhole() throws {
            let dir = ScratchDirectory()
            let (io, root) = try disk(holdingSynced: "file.tmp", in: dir)
            try io.rename(root.path + "/file.tmp", to: root.path + "/file").get()

            var seen = Set<[String]>()
            for seed in 0 ..< 32 {
                var random = SeededRandom(seed: UInt64(seed))
                let image = dir.url.appendingPathComponent("image-\(seed)")
                try io.writeImage(to: image, mode: .random, random: &random)
                seen.insert(try names(in: image))
            }
            #expect(seen == [["file.tmp"], ["file"]])
        }
    }
}
