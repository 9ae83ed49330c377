import ArgumentParser
import BenchSupport
import Foundation

/// Command-line options of `cluster-compare`. main.swift parses them (`parseOrExit`) and does the
/// work at its top level; the command type only describes the tool for `--help`.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster-compare",
        abstract: "Issue 17's cluster targets: ContentStoreCluster against plain PostgreSQL and restic.",
        discussion: """
            Runs ContentStoreCluster, plain PostgreSQL and restic on the same PostgreSQL and S3 servers \
            (Scripts/cluster-services.sh, started in a scratch directory and stopped at the end), round \
            by round. Writes cluster.md and cluster.json into --output and puts cluster.md's section into \
            its latest.md. Progress goes to stderr.
            """
    )
    static let workloadNames: Set<String> = ["commits", "ingest", "reads", "memory"]

    @Option(help: "Alternating rounds.")
    var rounds = 3
    @Option(help: "Writer processes of the commit workload.")
    var processes = 4
    @Option(help: "Writers (threads / connections) per process.")
    var writers = 4
    @Option(help: "Length of each commit run, in seconds.")
    var commitSeconds = 5.0
    @Option(name: .customLong("corpus-mb"), help: "Size of the ingested corpus in MB.")
    var corpusMB = 50
    @Option(help: "Threads of the cluster's ingest.")
    var ingestThreads = 8
    @Option(help: "4 KiB blobs of the point-read workload.")
    var readBlocks = 4_000
    @Option(help: "Length of each warm point-read run, in seconds.")
    var readSeconds = 2.0
    @Option(name: .customLong("memory-blobs"), help: ArgumentHelp("Cluster sizes of the memory workload (two or more, each ≥ 100).",
                                                                   valueName: "sizes"))
    var memorySizes = CommaSeparated([10_000, 100_000])
    @Option(name: .customLong("workloads"), help: ArgumentHelp("Workloads to run: commits, ingest, reads, memory.", valueName: "names"))
    var workloadList = CommaSeparated(["commits", "ingest", "reads", "memory"])
    @Option(help: "Where the report goes.")
    var output = "../Docs/benchmarks"
    @Option(name: .customLong("services-dir"), help: "Scratch directory of the services (default: a fresh one under $TMPDIR).")
    var servicesDirectory = NSTemporaryDirectory() + "contentstore-cluster-compare-\(getpid())"
    @Option(help: "The services script.")
    var servicesScript = "../Scripts/cluster-services.sh"

    func validate() throws {
        let positive: [(String, Double)] = [
            ("--rounds", Double(rounds)), ("--processes", Double(processes)), ("--writers", Double(writers)),
            ("--commit-seconds", commitSeconds), ("--corpus-mb", Double(corpusMB)), ("--ingest-threads", Double(ingestThreads)),
            ("--read-blocks", Double(readBlocks)), ("--read-seconds", readSeconds),
        ]
        for (flag, value) in positive where !(value > 0) { throw ValidationError("\(flag) needs a positive number") }
        guard memoryBlobs.count >= 2, memoryBlobs.allSatisfy({ $0 >= 100 }) else {
            throw ValidationError("--memory-blobs takes two or more sizes ≥ 100")
        }
        guard workloads.isSubset(of: Self.workloadNames) else {
            throw ValidationError("--workloads takes \(Self.workloadNames.sorted().joined(separator: ", "))")
        }
    }

    /// The cluster sizes of the memory workload.
    var memoryBlobs: [Int] { memorySizes.values }

    /// The workloads that run.
    var workloads: Set<String> { workloadList.names }
}
