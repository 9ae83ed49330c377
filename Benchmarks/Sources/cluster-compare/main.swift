import BenchSupport
import ContentStore
import Foundation

// Issue 17's speed targets, side by side on one machine's PostgreSQL and S3 servers. See
// Benchmarks/README.md ("cluster-compare") and Docs/cluster.md §12.

if CommandLine.arguments.dropFirst().first == "worker" {
    Worker.main(Array(CommandLine.arguments.dropFirst(2)))
}

let options = Options.parseOrExit()
let started = monotonicNanoseconds()
var report = ClusterReport(options: options)
report.loads.append(("start", machineLoad()))

Progress.log("starting PostgreSQL and the S3 gateway in \(options.servicesDirectory)")
do {
    let services = try ClusterServices(script: options.servicesScript, directory: options.servicesDirectory)
    defer { services.stop() }
    do {
        try runWorkloads(services)
    } catch {
        report.failure = "\(error)"
        Progress.log("cluster-compare failed: \(error)")
    }
} catch {
    report.skipped = "the services could not start, so this section was skipped: \(error)"
    Progress.log(report.skipped!)
}

report.loads.append(("end", machineLoad()))
report.elapsed = Double(monotonicNanoseconds() - started) / 1e9
try report.write(to: options.output)
Progress.log("wrote \(options.output)/cluster.md, cluster.json and the cluster section of latest.md")
print(report.markdown())

@MainActor func runWorkloads(_ services: ClusterServices) throws {
    let scratch = try POSIX.scratchDirectory("cluster-compare")
    defer { POSIX.removeTree(POSIX.scratchRoot) }
    var commits = options.workloads.contains("commits")
        ? CommitsWorkload(processes: options.processes, writers: options.writers, seconds: options.commitSeconds) : nil
    var ingest: IngestWorkload?
    if options.workloads.contains("ingest") {
        Progress.log("generating a \(options.corpusMB) MB corpus")
        let corpus = try Corpus.generate(at: scratch + "/corpus", totalBytes: options.corpusMB * 1_000_000)
        let restic = ExecutableSearch.find("restic")
        if restic == nil { report.notes.append("restic is not installed (make compare installs it with apt-get): the ingest ran without its peer") }
        ingest = IngestWorkload(corpus: corpus, threads: options.ingestThreads, scratch: scratch, restic: restic)
        report.corpus = String(format: "%d files, %.1f MB (%.1f MB unique)", corpus.files.count, Double(corpus.totalBytes) / 1e6, Double(corpus.uniqueBytes) / 1e6)
    }
    var reads: ReadsWorkload?
    if options.workloads.contains("reads") {
        Progress.log("point reads: storing \(options.readBlocks) blobs of 4 KiB in the cluster and in PostgreSQL")
        var generator = ContentGenerator(seed: 42)
        let blocks = (0 ..< options.readBlocks).map { _ in Data(generator.textBlock(size: 4096)) }
        reads = try ReadsWorkload(blocks: blocks, seconds: options.readSeconds, services: services)
    }
    for round in 0 ..< options.rounds {
        report.loads.append(("round \(round + 1)", machineLoad()))
        try commits?.run(round: round, services: services)
        try ingest?.run(round: round, services: services)
        try reads?.run(round: round, services: services)
        report.rows = (commits.map { [$0.rate, $0.p99] } ?? []) + (ingest.map { [$0.rate, $0.kdf] } ?? [])
            + (reads.map { [$0.coldRate, $0.coldP99, $0.warmRate, $0.warmP99] } ?? [])
    }
    if options.workloads.contains("memory") {
        var memory = MemoryWorkload(sizes: options.memoryBlobs)
        try memory.run(services: services)
        report.rows += [memory.resident, memory.peak]
    }
}

/// `uptime`'s load averages, for the report: absolute numbers on a shared machine are pessimistic.
func machineLoad() -> String {
    let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

enum ExecutableSearch {
    static func find(_ command: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(command)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
