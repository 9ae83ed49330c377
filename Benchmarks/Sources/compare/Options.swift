import Foundation

/// Command-line options of `compare`.
struct Options {
    var corpusMB = 200
    var rounds = 5
    var commitSeconds = 1.5
    var readSeconds = 1.0
    var readBlocks = 20_000
    var output = "Docs/benchmarks"
    var external = true
    var keepScratch = false
    var probeLimits = true
    /// Threads each built-in contender ingests with (default: one per core).
    var ingestThreads = ProcessInfo.processInfo.activeProcessorCount
    /// Only these contenders / workloads (for profiling one of them); nil = all.
    var contenders: Set<String>?
    var workloads: Set<String>?
    static let workloadNames: Set<String> = ["ingest", "commits", "reads"]

    static let usage = """
        usage: compare [options]
        Runs the same workloads on ContentStore, SQLite (GRDB), a file-per-key store and, for bulk
        ingest, restic and git; alternates them over several rounds; measures the machine's limits in
        the same run; writes latest.md, latest.json and latest.svg. Progress goes to stderr.

          --corpus-mb N        size of the generated corpus in MB (default 200)
          --rounds N           alternating rounds (default 5)
          --commit-seconds S   length of each durable-commit run (default 1.5)
          --read-seconds S     length of each point-read run (default 1.0)
          --read-blocks N      4 KiB blobs in each point-read store (default 20000)
          --output DIR         where the report goes (default Docs/benchmarks)
          --no-external        skip restic and git
          --keep-scratch       leave the scratch directory (CONTENTSTORE_BENCH_DIR) in place
          --ingest-threads N   threads each built-in contender ingests with (default: cores)
          --no-limits          skip the machine-limit probes (for profiling a contender)
          --only NAMES         comma-separated contenders to run (ContentStore, SQLite, file-per-key, restic, git)
          --workloads NAMES    comma-separated subset of: ingest (with re-ingest and collect), commits, reads
        """

    /// Whether the contender named `name` runs ("SQLite" matches "SQLite (GRDB)").
    func includes(contender name: String) -> Bool {
        guard let contenders else { return true }
        let lowered = name.lowercased()
        return contenders.contains { lowered == $0 || lowered.hasPrefix($0 + " ") }
    }

    func includes(workload name: String) -> Bool { workloads?.contains(name) ?? true }

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
            case "--corpus-mb": options.corpusMB = number(argument)
            case "--rounds": options.rounds = number(argument)
            case "--commit-seconds": options.commitSeconds = number(argument)
            case "--read-seconds": options.readSeconds = number(argument)
            case "--read-blocks": options.readBlocks = number(argument)
            case "--output": options.output = value(argument)
            case "--no-external": options.external = false
            case "--keep-scratch": options.keepScratch = true
            case "--no-limits": options.probeLimits = false
            case "--ingest-threads": options.ingestThreads = number(argument)
            case "--only":
                options.contenders = Set(value(argument).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            case "--workloads":
                let names = Set(value(argument).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                guard names.isSubset(of: workloadNames) else { fail("--workloads takes \(workloadNames.sorted().joined(separator: ", "))") }
                options.workloads = names
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown option \(argument)")
            }
        }
        return options
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("compare: \(message)\n\n\(usage)\n".utf8))
        exit(64)
    }
}
