import ArgumentParser
import BenchSupport
import Foundation

/// Command-line options of `compare`. main.swift parses them (`parseOrExit`) and does the work at
/// its top level; the command type only describes the tool for `--help`.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "ContentStore side by side with SQLite, a file per key, restic and git.",
        discussion: """
            Runs the same workloads on ContentStore, SQLite (GRDB), a file-per-key store and, for bulk \
            ingest, restic and git; alternates them over several rounds; measures the machine's limits \
            in the same run; writes latest.md, latest.json and latest.svg. Progress goes to stderr.
            """
    )
    static let workloadNames: Set<String> = ["ingest", "commits", "reads", "warehouse", "archive", "versions"]
    static let archiveSizeNames: Set<String> = ["1kib", "1mib", "1mibrandom"]

    @Option(name: .customLong("corpus-mb"), help: "Size of the generated corpus in MB.")
    var corpusMB = 200
    @Option(help: "Alternating rounds.")
    var rounds = 4
    @Option(help: "Length of each durable-commit run, in seconds.")
    var commitSeconds = 1.5
    @Option(help: "Length of each point-read run, in seconds.")
    var readSeconds = 1.0
    @Option(help: "4 KiB blobs in each point-read store.")
    var readBlocks = 20_000
    @Option(name: .customLong("read-cache-mib"), help: "ContentStore's read cache in MiB (default: its configuration's default).")
    var readCacheMiB: Int?
    @Option(help: "Where the report goes.")
    var output = "Docs/benchmarks"
    @Flag(name: .customLong("no-external"), help: "Skip restic and git.")
    var skipsExternal = false
    @Flag(help: "Leave the scratch directory (CONTENTSTORE_BENCH_DIR) in place.")
    var keepScratch = false
    @Flag(name: .customLong("no-limits"), help: "Skip the machine-limit probes (for profiling a contender).")
    var skipsLimits = false
    @Option(help: "Threads each built-in contender ingests with (default: one per core).")
    var ingestThreads = ProcessInfo.processInfo.activeProcessorCount
    @Option(name: .customLong("only"), help: ArgumentHelp(
        "Contenders to run: ContentStore, SQLite, file-per-key, directory-per-step, restic, borg, git.",
        valueName: "names"))
    var contenders: CommaSeparated<String>?
    @Option(help: ArgumentHelp("Workloads to run: ingest (with re-ingest and collect), commits, reads, warehouse, archive, versions.",
                               valueName: "names"))
    var workloads: CommaSeparated<String>?
    @Option(help: "Rounds (the first ones) that run the Warehouse and DataArchive workloads.")
    var facadeRounds = 3
    @Option(help: "Length of each Warehouse phase (add-step, undo, redo; fetch: half), in seconds.")
    var warehouseSeconds = 1.0
    @Option(help: "Threads (each on its own project) of the concurrent Warehouse run.")
    var warehouseThreads = 8
    @Option(name: .customLong("duplicate-mib"), help: "Assets of the duplicated Warehouse project, in MiB (0 skips).")
    var duplicateMiB = 100
    @Option(help: "Duplicates timed per round and contender.")
    var duplicates = 3
    @Option(help: "Length of each DataArchive run, in seconds.")
    var archiveSeconds = 0.5
    @Option(help: "Versions (10 distinct contents) in the DataArchive storage measurement.")
    var archiveVersions = 100
    @Option(help: ArgumentHelp("DataArchive value sizes to run: 1KiB, 1MiB, 1MiBrandom (default all).", valueName: "sizes"))
    var archiveSizes: CommaSeparated<String>?
    @Option(help: "Versions of the edited file (issue 8; its measurement is 100, the default fits the run in 10 minutes).")
    var versions = 12
    @Option(name: .customLong("version-mib"), help: "Size of that file in MiB.")
    var versionMiB = 16
    @Option(help: "Rounds that run the versions workload.")
    var versionRounds = 1

    func validate() throws {
        let positive: [(String, Double)] = [
            ("--corpus-mb", Double(corpusMB)), ("--rounds", Double(rounds)), ("--commit-seconds", commitSeconds),
            ("--read-seconds", readSeconds), ("--read-blocks", Double(readBlocks)), ("--read-cache-mib", Double(readCacheMiB ?? 1)),
            ("--ingest-threads", Double(ingestThreads)), ("--facade-rounds", Double(facadeRounds)),
            ("--warehouse-seconds", warehouseSeconds), ("--warehouse-threads", Double(warehouseThreads)),
            ("--duplicates", Double(duplicates)), ("--archive-seconds", archiveSeconds),
            ("--archive-versions", Double(archiveVersions)), ("--versions", Double(versions)),
            ("--version-mib", Double(versionMiB)), ("--version-rounds", Double(versionRounds)),
        ]
        for (flag, value) in positive where !(value > 0) { throw ValidationError("\(flag) needs a positive number") }
        guard duplicateMiB >= 0 else { throw ValidationError("--duplicate-mib needs a number ≥ 0") }
        guard workloads?.names.isSubset(of: Self.workloadNames) ?? true else {
            throw ValidationError("--workloads takes \(Self.workloadNames.sorted().joined(separator: ", "))")
        }
        guard archiveSizes?.names.isSubset(of: Self.archiveSizeNames) ?? true else {
            throw ValidationError("--archive-sizes takes 1KiB, 1MiB, 1MiBrandom")
        }
    }

    /// Whether restic, git and borg run.
    var external: Bool { !skipsExternal }

    /// Whether the machine-limit probes run: they need the store-engine workloads (issue 7).
    var probeLimits: Bool { !skipsLimits && ["ingest", "commits", "reads"].contains { includes(workload: $0) } }

    /// Whether the contender named `name` runs ("SQLite" matches "SQLite (GRDB)").
    func includes(contender name: String) -> Bool {
        guard let contenders else { return true }
        let lowered = name.lowercased()
        return contenders.names.contains { lowered == $0 || lowered.hasPrefix($0 + " ") }
    }

    func includes(workload name: String) -> Bool { workloads?.names.contains(name) ?? true }
}
