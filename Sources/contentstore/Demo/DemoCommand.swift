import ArgumentParser
import ContentStore
import Foundation

/// `contentstore demo`: real work on a fresh demo store, with a readable summary.
struct DemoCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Build a demo store, do real work on it, and print what happened with timings and ratios.",
        discussion: """
            The demo store is the directory "demo" inside the store path (./contentstore-data/demo by \
            default); it is deleted and created afresh on every run. Nothing else is touched.
            """)

    /// The parts of the demo, in order. Later layers add theirs here (see ``DemoSection``).
    static let sections: [any DemoSection] = [BlobsAndRecordsDemo(), WarehouseDemo(), DataArchiveDemo(), StateLensDemo(), PersistDemo(), SyncDemo()]

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: ArgumentHelp("Seed for the generated corpus.", visibility: .hidden))
    var seed: UInt64 = 1

    @Option(name: .long, help: ArgumentHelp("Multiplies the amount of data (1 = about 40 MiB).", visibility: .hidden))
    var scale: Double = 1

    func validate() throws {
        guard scale > 0, scale <= 100 else { throw ValidationError("--scale must be in (0, 100]") }
    }

    func run() throws {
        let started = ContinuousClock.now
        let root = options.storeURL
        let demoURL = root.appendingPathComponent("demo", isDirectory: true)
        try Self.recreate(demoURL, inside: root)

        var configuration = options.configuration()
        // Small packs, so that collection has sealed packs to rewrite and delete in a small demo.
        configuration.packSizeTarget = 2 << 20
        let store = try Store(at: demoURL, configuration: configuration)
        let context = DemoContext(store: store, storeURL: demoURL, configuration: configuration, seed: seed, scale: scale,
                                  printsAsItGoes: !options.json)
        defer { try? context.store.close() }
        if !options.json {
            Terminal.printResult("ContentStore demo: a fresh store at \(demoURL.path) (seed \(seed))")
        }
        for section in Self.sections {
            try context.section(section.title) { try section.run(in: context) }
        }

        var collection: GarbageCollectionReport?
        var verification: VerificationReport?
        try context.section("Maintenance") {
            collection = try context.step("gc", {
                try context.store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            }, describe: { report, _ in
                ("removed \(report.blobsRemoved) blobs (\(Format.bytes(report.logicalBytesFreed))); packs \(report.packsRewritten) rewritten, "
                    + "\(report.packsDeleted) deleted, \(Format.bytes(report.bytesCopied)) copied; \(Format.bytes(report.bytesReclaimed)) "
                    + "returned to the disk in \(Format.duration(report.duration))",
                 ["blobsRemoved": Double(report.blobsRemoved), "bytesReclaimed": Double(report.bytesReclaimed)])
            })
            verification = try context.step("verify", {
                try context.store.verify(VerificationOptions(readData: true))
            }, describe: { report, elapsed in
                (report.isClean
                    ? "clean: \(report.blobsChecked) blobs re-hashed, \(report.recordsChecked) records, reference counts exact (\(Format.duration(elapsed)))"
                    : "DAMAGED: \(report.problems.map(\.description).joined(separator: "; "))",
                 ["problems": Double(report.problems.count)])
            })
            try context.step("read back", { try Self.readBack(context.store) }, describe: { result, elapsed in
                ("\(result.records) records → \(result.blobs) distinct blobs, \(Format.bytes(result.bytes)) read and verified "
                    + "(\(Format.throughput(result.bytes, elapsed)))",
                 ["records": Double(result.records), "blobs": Double(result.blobs), "bytes": Double(result.bytes)])
            })
        }

        let statistics = try context.store.statistics()
        try context.store.close()
        let elapsed = ContinuousClock.now - started
        if options.json {
            try Terminal.printJSON(DemoReport(
                store: demoURL.path, seed: seed, sections: context.sections, garbageCollection: collection!,
                verification: verification!, statistics: statistics, seconds: elapsed.inSeconds))
        } else {
            Terminal.printResult("""

                Summary (\(Format.duration(elapsed)) in all)
                \(StatsCommand.describe(statistics, path: demoURL.path).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

                Look around: contentstore stats --store \(demoURL.path)
                """)
        }
        if verification?.isClean != true { throw ExitCode(ExitStatus.damaged) }
    }

    /// Reads every blob every record references, through one snapshot; each read is verified.
    static func readBack(_ store: Store) throws -> (records: Int, blobs: Int, bytes: UInt64) {
        try store.read { snapshot in
            var seen: Set<Digest> = []
            var bytes: UInt64 = 0
            let keys = try snapshot.keys(withPrefix: "")
            for key in keys {
                for digest in try snapshot.record(forKey: key)?.references ?? [] where seen.insert(digest).inserted {
                    bytes += UInt64(try snapshot.get(digest).count)
                }
            }
            return (keys.count, seen.count, bytes)
        }
    }

    /// Deletes the previous demo store (only if it is one) and leaves the path free.
    static func recreate(_ demo: URL, inside root: URL) throws {
        let manager = FileManager.default
        guard !manager.fileExists(atPath: root.appendingPathComponent("FORMAT").path) else {
            throw CommandFailure(message: "\(root.path) is a store; the demo works in a \"demo\" directory beside its files and will not write inside a store: pass another --store")
        }
        guard manager.fileExists(atPath: demo.path) else { return }
        let isStore = manager.fileExists(atPath: demo.appendingPathComponent("FORMAT").path)
        let isEmpty = ((try? manager.contentsOfDirectory(atPath: demo.path)) ?? ["?"]).isEmpty
        guard isStore || isEmpty else {
            throw CommandFailure(message: "\(demo.path) exists and is not a demo store; not deleting it")
        }
        if isStore {
            // Opening takes the lock: a demo store another process has open is not deleted under it (exit 3).
            try Store(at: demo).close()
        }
        do {
            try manager.removeItem(at: demo)
        } catch {
            throw CommandFailure(message: "cannot remove the old demo store at \(demo.path): \(error.localizedDescription)")
        }
    }
}
