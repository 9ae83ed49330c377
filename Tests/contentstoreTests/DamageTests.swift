import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Injected damage makes `verify` exit 2 and name what is damaged.
@Suite(.blocking) struct DamageTests {
    @Test func aBitFlipInAPackEntryIsFoundAndNamed() throws {
        let dir = ScratchDirectory()
        let blobs = try makeStore(at: dir.store, count: 4)
        let (digest, _) = try #require(blobs["k2"])
        try checkpoint(dir.store)
        let (path, offset) = try location(of: digest, in: dir.store)
        try flipBit(path, at: offset + 56 + 500)  // inside the stored bytes

        let verify = try CommandLineTool.run(["verify", "--read-data", "--store", dir.store.path, "--json"])
        #expect(verify.status == 2, "\(verify.stderr)")
        let report = try verify.json()
        #expect(report["isClean"] as? Bool == false)
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(problems.count == 1)
        #expect(problems.first?["kind"] as? String == "blobData")
        #expect(problems.first?["digest"] as? String == digest.hex)
        #expect(problems.first?["path"] as? String == path)
        #expect(problems.first?["offset"] as? Int == Int(offset))

        let text = try CommandLineTool.run(["verify", "--read-data", "--store", dir.store.path])
        #expect(text.status == 2)
        #expect(text.output.contains("DAMAGED") && text.output.contains(digest.hex) && text.output.contains(path))
    }

    @Test func aBitFlipInAnEntryHeaderIsFoundWithoutReadingData() throws {
        let dir = ScratchDirectory()
        let blobs = try makeStore(at: dir.store, count: 4)
        let (digest, _) = try #require(blobs["k1"])
        try checkpoint(dir.store)
        let (path, offset) = try location(of: digest, in: dir.store)
        try flipBit(path, at: offset + 10)  // the entry's digest field

        let verify = try CommandLineTool.run(["verify", "--store", dir.store.path, "--json"])
        #expect(verify.status == 2)
        let problem = try #require((try verify.json()["problems"] as? [[String: Any]])?.first)
        #expect(problem["kind"] as? String == "packEntry")
        #expect(problem["digest"] as? String == digest.hex)
        #expect(problem["path"] as? String == path)
    }

    /// Writes a checkpoint, so no WAL segment carries the packs' bytes any more: recovery would write
    /// those back over the damage these tests inject.
    func checkpoint(_ url: URL) throws {
        let store = try Store(at: url)
        try store.checkpoint()
        try store.close()
    }

    @Test func aDeletedPackIsFoundAndNamed() throws {
        let dir = ScratchDirectory()
        let blobs = try makeStore(at: dir.store, count: 4)
        let (path, _) = try location(of: try #require(blobs["k0"]).0, in: dir.store)
        try FileManager.default.removeItem(atPath: path)

        let verify = try CommandLineTool.run(["verify", "--store", dir.store.path, "--json"])
        #expect(verify.status == 2)
        let problems = try #require(try verify.json()["problems"] as? [[String: Any]])
        #expect(problems.map { $0["kind"] as? String } == ["missingPack"])
        #expect(problems.first?["path"] as? String == path)
    }

    /// A count the records do not account for, with every checksum valid: what a bug in count
    /// maintenance would leave. Crafted by rewriting the checkpoint with the store's own writer.
    @Test func aReferenceCountMismatchIsFoundAndNamed() throws {
        let dir = ScratchDirectory()
        let blobs = try makeStore(at: dir.store, count: 3)
        let (digest, _) = try #require(blobs["k1"])
        do {
            let store = try Store(at: dir.store)
            try store.checkpoint()
            try store.close()
        }
        let checkpoints = dir.store.appendingPathComponent("checkpoint")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: checkpoints.path).first { $0.hasSuffix(".ckpt") })
        var contents = try Checkpoint.load(path: checkpoints.appendingPathComponent(name).path, limits: Store.Limits(), fileSystem: FileSystem(io: SystemFileIO()))
        let adjusted = contents.state.blobs.adjustReferences(of: digest, by: 2, time: 0)
        #expect(adjusted)
        try Checkpoint.write(contents, directory: checkpoints.path, fileSystem: FileSystem(io: SystemFileIO()))

        let verify = try CommandLineTool.run(["verify", "--store", dir.store.path, "--json"])
        #expect(verify.status == 2)
        let problems = try #require(try verify.json()["problems"] as? [[String: Any]])
        #expect(problems.map { $0["kind"] as? String } == ["refCount"])
        #expect(problems.first?["digest"] as? String == digest.hex)
    }

    @Test func aStoreThatDoesNotOpenIsReportedAsDamage() throws {
        let dir = ScratchDirectory()
        try makeStore(at: dir.store, count: 3)
        do {
            let store = try Store(at: dir.store)
            try store.checkpoint()
            try store.close()
        }
        let checkpoints = dir.store.appendingPathComponent("checkpoint")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: checkpoints.path).first { $0.hasSuffix(".ckpt") })
        let path = checkpoints.appendingPathComponent(name).path
        try flipBit(path, at: 60)  // inside the first frame

        let verify = try CommandLineTool.run(["verify", "--store", dir.store.path, "--json"])
        #expect(verify.status == 2, "\(verify.stderr)")
        let problem = try #require((try verify.json()["problems"] as? [[String: Any]])?.first)
        #expect(problem["kind"] as? String == "open")
        #expect(problem["path"] as? String == path)

        // Other commands cannot work on it: an error, naming the file.
        let stats = try CommandLineTool.run(["stats", "--store", dir.store.path])
        #expect(stats.status == 1)
        #expect(stats.stderr.contains(path))
    }
}
