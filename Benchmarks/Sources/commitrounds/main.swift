// `commitrounds`: durable commits from many writers, contenders interleaved round by round in one
// process, so that on a shared machine the ratios of a round compare like with like (issue 15's async
// gap, issue 19's 16-writer commits). Each round runs, in alternating order, N plain threads calling the
// blocking `write` and N tasks awaiting the async `write`, each on a fresh store, and prints commits/s,
// CPU µs and voluntary context switches per commit, the commits each WAL sync covered, the cores the
// process used meanwhile, and the async/blocking ratio.
//
//   swift build -c release --product commitrounds && .build/release/commitrounds [--rounds 6]
//       [--seconds 2] [--writers 16] [--directory /var/tmp] [--only blocking|async]
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BenchSupport
import ContentStore
import Foundation
import Synchronization

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "commitrounds",
        abstract: "Durable commits from many writers, blocking threads against awaiting tasks, round by round."
    )
    @Option(help: "Rounds, each running every contender.")
    var rounds = 6
    @Option(help: "Length of each contender's run, in seconds.")
    var seconds = 2.0
    @Option(help: "Writers (threads or tasks) of each run.")
    var writers = 16
    @Option(help: "Where the stores are made (a fresh one per run).")
    var directory = "/var/tmp"
    @Option(help: "Run one contender only.")
    var only: Contender?

    enum Contender: String, ExpressibleByArgument, CaseIterable { case blocking, async }

    func validate() throws {
        guard rounds > 0, seconds > 0, writers > 0 else { throw ValidationError("--rounds, --seconds and --writers need positive numbers") }
    }
}

/// What one contender did in one round.
struct Run {
    var commits: Int
    var seconds: Double
    var cpuSeconds: Double
    var voluntarySwitches: Int
    var walSyncs: Int64
    var rate: Double { Double(commits) / seconds }
    var cpuMicrosecondsPerCommit: Double { cpuSeconds * 1e6 / Double(commits) }
    var switchesPerCommit: Double { Double(voluntarySwitches) / Double(commits) }
    var commitsPerSync: Double { Double(commits) / Double(max(1, walSyncs)) }
}

private func voluntarySwitches() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_nvcsw
}

private let value = Data(repeating: 0x42, count: 100)

/// Opens a fresh store, runs `body` with a deadline, and measures it.
private func measure(_ options: Options, _ label: String, _ body: (Store, UInt64) async throws -> Int) async throws -> Run {
    let directory = URL(fileURLWithPath: options.directory).appendingPathComponent("commitrounds-\(getpid())-\(label)")
    try? FileManager.default.removeItem(at: directory)
    defer { try? FileManager.default.removeItem(at: directory) }
    let syncCounter = WALSyncCounter()
    var configuration = Store.Configuration()
    configuration.metricsFactory = syncCounter
    let store = try Store(at: directory, configuration: configuration)
    defer { try? store.close() }
    let start = monotonicNanoseconds()
    let cpu = cpuSeconds()
    let switches = voluntarySwitches()
    let syncs = syncCounter.syncs
    let commits = try await body(store, start + UInt64(options.seconds * 1e9))
    return Run(commits: commits, seconds: Double(monotonicNanoseconds() - start) / 1e9,
               cpuSeconds: cpuSeconds() - cpu, voluntarySwitches: voluntarySwitches() - switches, walSyncs: syncCounter.syncs - syncs)
}

private func blocking(_ options: Options) async throws -> Run {
    try await measure(options, "blocking") { store, deadline in
        let total = Atomic<Int>(0)
        try runThreads(options.writers) { writer in
            var commits = 0
            while monotonicNanoseconds() < deadline {
                try store.write { try $0.setRecord(Record(value: value + [UInt8(truncatingIfNeeded: commits)]), forKey: "w\(writer)") }
                commits += 1
            }
            total.add(commits, ordering: .relaxed)
        }
        return total.load(ordering: .relaxed)
    }
}

private func awaiting(_ options: Options) async throws -> Run {
    try await measure(options, "async") { store, deadline in
        try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0 ..< options.writers {
                group.addTask {
                    var commits = 0
                    while monotonicNanoseconds() < deadline {
                        let byte = UInt8(truncatingIfNeeded: commits)
                        try await store.write { try $0.setRecord(Record(value: value + [byte]), forKey: "w\(writer)") }
                        commits += 1
                    }
                    return commits
                }
            }
            return try await group.reduce(0, +)
        }
    }
}

private func line(_ name: String, _ run: Run) -> String {
    String(format: "%-9@ %9.0f commits/s  %6.1f µs CPU/commit  %5.2f voluntary switches/commit  %5.1f commits/WAL sync  %4.2f cores",
           name, run.rate, run.cpuMicrosecondsPerCommit, run.switchesPerCommit, run.commitsPerSync, run.cpuSeconds / run.seconds)
}

let options = Options.parseOrExit()
print("commitrounds: \(options.writers) writers, \(options.rounds) rounds of \(options.seconds) s each, stores in \(options.directory)")
var ratios: [Double] = []
for round in 1 ... options.rounds {
    var runs: [String: Run] = [:]
    let order: [Options.Contender] = round % 2 == 1 ? [.blocking, .async] : [.async, .blocking]
    for contender in order where options.only.map({ $0 == contender }) ?? true {
        runs[contender.rawValue] = contender == .blocking ? try await blocking(options) : try await awaiting(options)
    }
    print("round \(round):")
    for name in ["blocking", "async"] { if let run = runs[name] { print("  " + line(name, run)) } }
    if let sync = runs["blocking"], let async = runs["async"] {
        ratios.append(async.rate / sync.rate)
        print(String(format: "  async / blocking: %.2f", async.rate / sync.rate))
    }
}
if !ratios.isEmpty {
    let sorted = ratios.sorted()
    print(String(format: "async / blocking per round: %@; median %.2f",
                 ratios.map { String(format: "%.2f", $0) }.joined(separator: ", "), sorted[sorted.count / 2]))
}
