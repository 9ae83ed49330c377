import Foundation
import Testing
@testable import ContentStore
@testable import contentstore
import TestThreads

/// The built binary, run end to end: results, JSON fields, exit codes.
@Suite(.blocking) struct CommandTests {
    @Test func gcVerifyAndStatsPrintTheDocumentedJSON() throws {
        let dir = ScratchDirectory()
        try makeStore(at: dir.store, count: 6, garbage: 3)
        let store = ["--store", dir.store.path, "--json"]

        let stats = try CommandLineTool.run(["stats"] + store)
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stderr.isEmpty, "nothing on stderr with --json")
        let statistics = try stats.json()
        for key in ["blobCount", "recordCount", "logicalBytes", "storedBytes", "walBytes", "packCount",
                    "compressionRatio", "deduplicationRatio", "liveStoredBytes", "unreferencedBlobCount"] {
            #expect(statistics[key] != nil, "stats has \(key)")
        }
        #expect(statistics["blobCount"] as? Int == 9)
        #expect(statistics["recordCount"] as? Int == 6)
        #expect(statistics["unreferencedBlobCount"] as? Int == 3)
        #expect(stats.output.contains("\"blobCount\" : 9"), "keys are member names")
        #expect(Self.keysAreSorted(stats.output))

        let dryRun = try CommandLineTool.run(["gc", "--grace", "0", "--dry-run"] + store)
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        #expect(try dryRun.json()["dryRun"] as? Bool == true)
        #expect(try dryRun.json()["blobsRemoved"] as? Int == 3)

        let gc = try CommandLineTool.run(["gc", "--grace", "0"] + store)
        #expect(gc.status == 0, "\(gc.stderr)")
        let report = try gc.json()
        for key in ["blobsRemoved", "bytesFreed", "packsRewritten", "packsDeleted", "bytesCopied", "duration", "bytesReclaimed", "dryRun"] {
            #expect(report[key] != nil, "gc has \(key)")
        }
        #expect(report["blobsRemoved"] as? Int == 3)
        #expect(report["dryRun"] as? Bool == false)
        #expect(report["duration"] is Double)
        #expect(Self.keysAreSorted(gc.output))

        let verify = try CommandLineTool.run(["verify", "--read-data"] + store)
        #expect(verify.status == 0, "\(verify.stderr)")
        let verification = try verify.json()
        #expect(verification["isClean"] as? Bool == true)
        #expect((verification["problems"] as? [Any])?.isEmpty == true)
        #expect(verification["blobsChecked"] as? Int == 6)
        #expect(verification["readData"] as? Bool == true)

        let checkpoint = try CommandLineTool.run(["checkpoint"] + store)
        #expect(checkpoint.status == 0, "\(checkpoint.stderr)")
        #expect(try checkpoint.json()["walBytesAfter"] as? Int == 32)
    }

    @Test func textOutputIsReadable() throws {
        let dir = ScratchDirectory()
        try makeStore(at: dir.store, count: 3, garbage: 1)
        let stats = try CommandLineTool.run(["stats", "--store", dir.store.path])
        #expect(stats.status == 0)
        #expect(stats.output.contains("blobs") && stats.output.contains("4 (1 unreferenced"))
        #expect(stats.output.contains("compression"))
        let gc = try CommandLineTool.run(["gc", "--grace", "0s", "--store", dir.store.path])
        #expect(gc.status == 0)
        #expect(gc.output.hasPrefix("Removed 1 blobs"))
        let verify = try CommandLineTool.run(["verify", "--store", dir.store.path])
        #expect(verify.status == 0)
        #expect(verify.output.hasPrefix("OK: 3 blobs"))
        #expect(verify.stderr.isEmpty, "stderr is not a terminal here: no progress, no logs")
    }

    @Test func putAndGetRoundTrip() throws {
        let dir = ScratchDirectory()
        let file = dir.url.appendingPathComponent("input.bin")
        var random = TestRandom(seed: 4)
        let data = random.bytes(100_000)
        try data.write(to: file)

        let put = try CommandLineTool.run(["put", file.path, "-", "--key", "files", "--store", dir.store.path, "--json"], stdin: Data("from stdin".utf8))
        #expect(put.status == 0, "\(put.stderr)")
        let blobs = try #require(try put.json()["blobs"] as? [[String: Any]])
        #expect(blobs.count == 2)
        let digest = try #require(blobs.first?["digest"] as? String)
        #expect(digest == Digest.sha256(data).hex)
        #expect(blobs.last?["digest"] as? String == Digest.sha256(Data("from stdin".utf8)).hex)
        #expect(try put.json()["key"] as? String == "files")

        let text = try CommandLineTool.run(["put", file.path, "--store", dir.store.path])
        #expect(text.output == "\(digest)  \(file.path)\n")

        let get = try CommandLineTool.run(["get", digest, "--store", dir.store.path])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(get.stdout == data, "raw bytes on stdout")

        let output = dir.url.appendingPathComponent("copy.bin")
        let getToFile = try CommandLineTool.run(["get", digest, "-o", output.path, "--store", dir.store.path, "--json"])
        #expect(getToFile.status == 0, "\(getToFile.stderr)")
        #expect(try Data(contentsOf: output) == data)
        #expect(try getToFile.json()["size"] as? Int == data.count)

        // The record keeps the blobs through a collection with no grace.
        #expect(try CommandLineTool.run(["gc", "--grace", "0", "--store", dir.store.path]).status == 0)
        #expect(try CommandLineTool.run(["get", digest, "--store", dir.store.path]).stdout == data)
    }

    @Test func errorsExitOneAndNameTheCause() throws {
        let dir = ScratchDirectory()
        let missing = dir.url.appendingPathComponent("nowhere").path
        let stats = try CommandLineTool.run(["stats", "--store", missing])
        #expect(stats.status == 1)
        #expect(stats.stderr.contains(missing))
        #expect(stats.output.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: missing), "a maintenance command does not create a store")

        try makeStore(at: dir.store, count: 1)
        let unknown = String(repeating: "ab", count: 32)
        let get = try CommandLineTool.run(["get", unknown, "--store", dir.store.path])
        #expect(get.status == 1)
        #expect(get.stderr.contains(unknown))

        let badDigest = try CommandLineTool.run(["get", "xyz", "--store", dir.store.path])
        #expect(badDigest.status == 1)
        #expect(badDigest.stderr.contains("xyz"))

        let badGrace = try CommandLineTool.run(["gc", "--grace", "soon", "--store", dir.store.path])
        #expect(badGrace.status == 1)
        #expect(badGrace.stderr.contains("soon"))

        let notAStore = dir.url.appendingPathComponent("plain")
        try FileManager.default.createDirectory(at: notAStore, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: notAStore.appendingPathComponent("file"))
        let put = try CommandLineTool.run(["put", "-", "--store", notAStore.path], stdin: Data("x".utf8))
        #expect(put.status == 1)
        #expect(put.stderr.contains("not a ContentStore store"))

        let unreadable = try CommandLineTool.run(["put", dir.url.appendingPathComponent("absent").path, "--store", dir.store.path])
        #expect(unreadable.status == 1)
        #expect(unreadable.stderr.contains("absent"))
    }

    @Test func theStorePathComesFromTheEnvironment() throws {
        let dir = ScratchDirectory()
        try makeStore(at: dir.store, count: 2)
        let stats = try CommandLineTool.run(["stats", "--json"], environment: ["CONTENTSTORE_PATH": dir.store.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(try stats.json()["recordCount"] as? Int == 2)
    }

    @Test func helpIsAResult() throws {
        let help = try CommandLineTool.run(["--help"])
        #expect(help.status == 0)
        for name in ["gc", "verify", "stats", "checkpoint", "put", "get", "demo", "serve"] { #expect(help.output.contains(name)) }
        #expect(!help.output.contains("_torture"), "test support stays hidden")
    }

    @Test func demoDoesRealWorkAndVerifies() throws {
        let dir = ScratchDirectory()
        let demo = try CommandLineTool.run(["demo", "--store", dir.url.path, "--scale", "0.05", "--json"])
        #expect(demo.status == 0, "\(demo.stderr)")
        let report = try demo.json()
        #expect((report["verification"] as? [String: Any])?["isClean"] as? Bool == true)
        #expect(((report["garbageCollection"] as? [String: Any])?["blobsRemoved"] as? Int ?? 0) > 0)
        #expect((report["sections"] as? [[String: Any]])?.map { $0["title"] as? String } == ["Blobs and records", "Warehouse", "DataArchive", "StateLens", "Persist", "Sync", "Maintenance"])
        let demoStore = dir.url.appendingPathComponent("demo")
        #expect(FileManager.default.fileExists(atPath: demoStore.appendingPathComponent("FORMAT").path))

        // A second run starts again from a fresh store, and the text output reads as a summary.
        let again = try CommandLineTool.run(["demo", "--store", dir.url.path, "--scale", "0.05"])
        #expect(again.status == 0, "\(again.stderr)")
        for word in ["put", "dedup", "compression", "gc", "verify", "clean", "Summary"] { #expect(again.output.contains(word)) }
        let stats = try CommandLineTool.run(["stats", "--store", demoStore.path, "--json"])
        #expect(try stats.json()["unreferencedBlobCount"] as? Int == 0)
    }

    @Test(arguments: [("0", 0), ("30s", 30_000), ("10m", 600_000), ("1h", 3_600_000), ("2d", 172_800_000),
                      ("500ms", 500), ("1.5h", 5_400_000), ("45", 45_000), ("1w", 604_800_000)])
    func durationsParse(text: String, milliseconds: Int64) throws {
        #expect(try #require(DurationArgument(argument: text)).duration == .milliseconds(milliseconds))
    }

    @Test(arguments: ["", "-1s", "5x", "h", "1.2.3s", "nan", "1e400s"])
    func badDurationsAreRefused(text: String) {
        #expect(DurationArgument(argument: text) == nil)
    }

    /// Whether every JSON object's keys appear in ascending order (pretty-printed output, one key per line).
    static func keysAreSorted(_ json: String) -> Bool {
        var stack: [[String]] = [[]]
        for line in json.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("\""), let end = trimmed.dropFirst().firstIndex(of: "\"") {
                let key = String(trimmed[trimmed.index(after: trimmed.startIndex) ..< end])
                if let last = stack[stack.count - 1].last, last > key { return false }
                stack[stack.count - 1].append(key)
            }
            if trimmed.hasSuffix("{") { stack.append([]) }
            if trimmed.hasPrefix("}") && stack.count > 1 { stack.removeLast() }
        }
        return true
    }
}
