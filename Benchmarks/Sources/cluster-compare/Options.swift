import Foundation

/// Command-line options of `cluster-compare`.
struct Options {
    var rounds = 3
    var processes = 4
    var writers = 4
    var commitSeconds = 5.0
    var corpusMB = 50
    var ingestThreads = 8
    var readBlocks = 4_000
    var readSeconds = 2.0
    var memoryBlobs = [10_000, 100_000]
    var output = "../Docs/benchmarks"
    var servicesDirectory = NSTemporaryDirectory() + "contentstore-cluster-compare-\(getpid())"
    var servicesScript = "../Scripts/cluster-services.sh"
    var workloads: Set<String> = workloadNames
    static let workloadNames: Set<String> = ["commits", "ingest", "reads", "memory"]

    static let usage = """
        usage: cluster-compare [options]
        Issue 17's cluster targets: ContentStoreCluster against plain PostgreSQL and restic on the same
        PostgreSQL and S3 servers (Scripts/cluster-services.sh, started in a scratch directory and
        stopped at the end), round by round. Writes cluster.md and cluster.json into --output and
        puts cluster.md's section into its latest.md. Progress goes to stderr.

          --rounds N            alternating rounds (default 3)
          --processes N         writer processes of the commit workload (default 4)
          --writers N           writers (threads / connections) per process (default 4)
          --commit-seconds S    length of each commit run (default 5)
          --corpus-mb N         size of the ingested corpus in MB (default 50)
          --ingest-threads N    threads of the cluster's ingest (default 8)
          --read-blocks N       4 KiB blobs of the point-read workload (default 4000)
          --read-seconds S      length of each warm point-read run (default 2)
          --memory-blobs A,B    cluster sizes of the memory workload (default 10000,100000)
          --workloads NAMES     comma-separated subset of: commits, ingest, reads, memory
          --output DIR          where the report goes (default ../Docs/benchmarks)
          --services-dir DIR    scratch directory of the services (default: a fresh one under $TMPDIR)
          --services-script P   Scripts/cluster-services.sh (default ../Scripts/cluster-services.sh)
        """

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var iterator = arguments.dropFirst().makeIterator()
        func value(_ flag: String) -> String {
            guard let next = iterator.next() else { fail("\(flag) needs a value") }
            return next
        }
        func number<T: LosslessStringConvertible & Comparable & Numeric>(_ flag: String) -> T {
            guard let parsed = T(value(flag)), parsed > 0 else { fail("\(flag) needs a positive number") }
            return parsed
        }
        while let argument = iterator.next() {
            switch argument {
            case "--rounds": options.rounds = number(argument)
            case "--processes": options.processes = number(argument)
            case "--writers": options.writers = number(argument)
            case "--commit-seconds": options.commitSeconds = number(argument)
            case "--corpus-mb": options.corpusMB = number(argument)
            case "--ingest-threads": options.ingestThreads = number(argument)
            case "--read-blocks": options.readBlocks = number(argument)
            case "--read-seconds": options.readSeconds = number(argument)
            case "--memory-blobs":
                let sizes = value(argument).split(separator: ",").compactMap { Int($0) }
                guard sizes.count >= 2, sizes.allSatisfy({ $0 >= 100 }) else { fail("--memory-blobs takes two or more sizes ≥ 100") }
                options.memoryBlobs = sizes
            case "--workloads":
                let names = Set(value(argument).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                guard names.isSubset(of: workloadNames) else { fail("--workloads takes \(workloadNames.sorted().joined(separator: ", "))") }
                options.workloads = names
            case "--output": options.output = value(argument)
            case "--services-dir": options.servicesDirectory = value(argument)
            case "--services-script": options.servicesScript = value(argument)
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown option \(argument)")
            }
        }
        return options
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("cluster-compare: \(message)\n\n\(usage)\n".utf8))
        exit(64)
    }
}
