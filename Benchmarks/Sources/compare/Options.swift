import Foundation

/// Command-line options of `compare`.
struct Options {
    var corpusMB = 200
    var rounds = 4
    var commitSeconds = 1.5
    var readSeconds = 1.0
    var readBlocks = 20_000
    /// ContentStore's `readCacheSize` in MiB; nil = its default.
    var readCacheMiB: Int?
    var output = "Docs/benchmarks"
    var external = true
    var keepScratch = false
    var probeLimits = true
    /// Threads each built-in contender ingests with (default: one per core).
    var ingestThreads = ProcessInfo.processInfo.activeProcessorCount
    /// Only these contenders / workloads (for profiling one of them); nil = all.
    var contenders: Set<String>?
    var workloads: Set<String>?
    static let workloadNames: Set<String> = ["ingest", "commits", "reads", "warehouse", "archive", "versions"]
    /// Rounds (the first ones) that run the Warehouse and DataArchive workloads.
    var facadeRounds = 3
    /// Warehouse (issue 4): seconds per timed phase, threads of the concurrent run, the duplicated project's size.
    var warehouseSeconds = 1.0
    var warehouseThreads = 8
    var duplicateMiB = 100
    var duplicates = 3
    /// DataArchive (issue 5): seconds per timed run; versions of the storage measurement.
    var archiveSeconds = 0.5
    var archiveVersions = 100
    /// DataArchive value sizes to run ("1kib", "1mib", "1mibrandom"); nil = all.
    var archiveSizes: Set<String>?
    /// Versions (issue 8): how many versions of a file of `versionMiB`, in the first `versionRounds` rounds.
    var versions = 12
    var versionMiB = 16
    var versionRounds = 1

    static let usage = """
        usage: compare [options]
        Runs the same workloads on ContentStore, SQLite (GRDB), a file-per-key store and, for bulk
        ingest, restic and git; alternates them over several rounds; measures the machine's limits in
        the same run; writes latest.md, latest.json and latest.svg. Progress goes to stderr.

          --corpus-mb N        size of the generated corpus in MB (default 200)
          --rounds N           alternating rounds (default 4)
          --commit-seconds S   length of each durable-commit run (default 1.5)
          --read-seconds S     length of each point-read run (default 1.0)
          --read-blocks N      4 KiB blobs in each point-read store (default 20000)
          --read-cache-mib N   ContentStore's read cache in MiB (default: its configuration's default)
          --output DIR         where the report goes (default Docs/benchmarks)
          --no-external        skip restic and git
          --keep-scratch       leave the scratch directory (CONTENTSTORE_BENCH_DIR) in place
          --ingest-threads N   threads each built-in contender ingests with (default: cores)
          --no-limits          skip the machine-limit probes (for profiling a contender)
          --only NAMES         comma-separated contenders to run (ContentStore, SQLite, file-per-key,
                               directory-per-step, restic, borg, git)
          --workloads NAMES    comma-separated subset of: ingest (with re-ingest and collect), commits, reads,
                               warehouse, archive, versions
          --facade-rounds N    rounds that run the Warehouse and DataArchive workloads (default 3)
          --warehouse-seconds S  length of each Warehouse phase (add-step, undo, redo; fetch: half) (default 1.0)
          --warehouse-threads N  threads (each on its own project) of the concurrent Warehouse run (default 8)
          --duplicate-mib N    assets of the duplicated Warehouse project, in MiB (default 100; 0 skips)
          --duplicates N       duplicates timed per round and contender (default 3)
          --archive-seconds S  length of each DataArchive run (default 0.5)
          --archive-versions N versions (10 distinct contents) in the DataArchive storage measurement (default 100)
          --archive-sizes L    comma-separated DataArchive value sizes to run: 1KiB, 1MiB, 1MiBrandom (default all)
          --versions N         versions of the edited file (issue 8) (default 12, to fit the run in 10 minutes;
                               issue 8's measurement is 100)
          --version-mib N      size of that file in MiB (default 16)
          --version-rounds N   rounds that run the versions workload (default 1)
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
        func nonNegative(_ flag: String) -> Int {
            guard let parsed = Int(value(flag)), parsed >= 0 else { fail("\(flag) needs a number ≥ 0") }
            return parsed
        }
        while let argument = iterator.next() {
            switch argument {
            case "--corpus-mb": options.corpusMB = number(argument)
            case "--rounds": options.rounds = number(argument)
            case "--commit-seconds": options.commitSeconds = number(argument)
            case "--read-seconds": options.readSeconds = number(argument)
            case "--read-blocks": options.readBlocks = number(argument)
            case "--read-cache-mib": options.readCacheMiB = number(argument)
            case "--output": options.output = value(argument)
            case "--no-external": options.external = false
            case "--keep-scratch": options.keepScratch = true
            case "--no-limits": options.probeLimits = false
            case "--ingest-threads": options.ingestThreads = number(argument)
            case "--facade-rounds": options.facadeRounds = number(argument)
            case "--warehouse-seconds": options.warehouseSeconds = number(argument)
            case "--warehouse-threads": options.warehouseThreads = number(argument)
            case "--duplicate-mib": options.duplicateMiB = nonNegative(argument)
            case "--duplicates": options.duplicates = number(argument)
            case "--archive-seconds": options.archiveSeconds = number(argument)
            case "--archive-versions": options.archiveVersions = number(argument)
            case "--archive-sizes":
                let labels = Set(value(argument).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                guard labels.isSubset(of: ["1kib", "1mib", "1mibrandom"]) else { fail("--archive-sizes takes 1KiB, 1MiB, 1MiBrandom") }
                options.archiveSizes = labels
            case "--versions": options.versions = number(argument)
            case "--version-mib": options.versionMiB = number(argument)
            case "--version-rounds": options.versionRounds = number(argument)
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
