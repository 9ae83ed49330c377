#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import ContentStore

/// A workload process (Tests/CrashWorkload) killed with SIGKILL at random moments, again and again
/// on the same store: after each kill the store opens to exactly a prefix of the commits (told by
/// the "counter" record every transaction sets), holding every commit the workload reported
/// acknowledged, and `verify(readData: true)` is clean.
///
/// `RELIABILITY_CRASH_KILLS` sets the number of kills (default 200; `make crash-soak` runs 10,000).
/// `RELIABILITY_CRASH_SEED` the seed (default 1). The workload is found beside the test bundle or
/// at `$CRASH_WORKLOAD_BINARY`.
extension Reliability {
    @Suite("Reliability: process crashes")
    struct ProcessCrashTests {
        static let executable: URL? = {
            var candidates: [URL] = []
            if let path = ProcessInfo.processInfo.environment["CRASH_WORKLOAD_BINARY"], !path.isEmpty {
                candidates.append(URL(fileURLWithPath: path))
            }
            var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
            for bundle in [Bundle.main] + Bundle.allBundles {
                directories += [bundle.bundleURL, bundle.bundleURL.deletingLastPathComponent()]
            }
            candidates += directories.map { $0.appendingPathComponent("CrashWorkload") }
            return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
        }()

        /// One transaction as the workload reported it.
        struct Transaction {
            var txid: String
            var counter: Int
            var changes: Journal.Changes
        }

        /// Parses the workload's report. A last line without its newline was cut by the kill: a
        /// line is written with one `write(2)` before what it announces happens, so it is dropped.
        static func parse(_ output: String) throws -> (transactions: [Transaction], acknowledged: Set<String>, failures: [String]) {
            var transactions: [Transaction] = []
            var acknowledged: Set<String> = []
            var failures: [String] = []
            var lines = output.split(separator: "\n", omittingEmptySubsequences: false)
            if output.last != "\n" { lines.removeLast() }
            for line in lines where !line.isEmpty {
                let fields = line.split(separator: " ")
                switch fields.first {
                case "B":
                    let txid = String(fields[1])
                    let counter = try #require(Int(fields[2]), "bad line \(line)")
                    var changes: Journal.Changes = ["counter": Record(value: Data(String(counter).utf8))]
                    for field in fields.dropFirst(3) {
                        let parts = field.split(separator: "=", maxSplits: 1)
                        let key = String(parts[0])
                        if parts[1] == "-" {
                            changes[key] = .some(nil)
                            continue
                        }
                        let pieces = parts[1].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                        let padding = try #require(Int(pieces[0]), "bad line \(line)")
                        let references = try pieces[1].split(separator: ",").map { try #require(Digest(hex: String($0)), "bad line \(line)") }
                        let value = Data("\(txid) \(key)".utf8) + Data(repeating: UInt8(ascii: "x"), count: padding)
                        changes[key] = Record(value: value, references: references)
                    }
                    transactions.append(Transaction(txid: txid, counter: counter, changes: changes))
                case "A":
                    acknowledged.insert(String(fields[1]))
                default:
                    failures.append(String(line))
                }
            }
            return (transactions, acknowledged, failures)
        }

        /// Waits until the workload has written its first line (it has opened the store and begun a
        /// transaction), or has exited, or 30 s have passed.
        static func waitUntilItBegins(writingTo output: URL, _ process: Process) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while process.isRunning, ContinuousClock.now < deadline,
                  ((try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0) == 0 {
                try await Task.sleep(for: .milliseconds(1))
            }
        }

        @Test func killedAtRandomMomentsTheStoreOpensToACommittedPrefixWithEveryAcknowledgedCommit() async throws {
            let executable = try #require(Self.executable, "CrashWorkload was not found beside the tests; build it (swift build) or set CRASH_WORKLOAD_BINARY")
            let kills = environmentInteger("RELIABILITY_CRASH_KILLS", default: 200)
            let seed = UInt64(environmentInteger("RELIABILITY_CRASH_SEED", default: 1))
            let dir = ScratchDirectory()
            let store = dir.store
            var random = SeededRandom(seed: seed)
            var state: Journal.State = [:]
            var killed = 0, survived = 0, acknowledgedTotal = 0, inFlightApplied = 0, exitedEarly = 0
            let started = ContinuousClock.now

            for run in 0 ..< kills {
                let outputURL = dir.url.appendingPathComponent("out-\(run)")
                let errorURL = dir.url.appendingPathComponent("err-\(run)")
                _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
                _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
                let process = Process()
                process.executableURL = executable
                let durability = random.next() % 3 == 0 ? "none" : "full"
                process.arguments = [store.path, "\(seed)", "\(run)", "--threads", "\(1 + random.next() % 3)", "--durability", durability]
                process.standardOutput = try FileHandle(forWritingTo: outputURL)
                process.standardError = try FileHandle(forWritingTo: errorURL)
                try process.run()
                // Mostly while it commits, sometimes while it is still opening (recovering). A kill
                // meant for its commits waits until it has begun one: under load a child takes longer
                // to start and recover, and a delay counted from its launch would land in its open.
                let whileOpening = random.next() % 10 == 0
                let delay = whileOpening ? random.next() % 15_000 : 5_000 + random.next() % 120_000
                if !whileOpening { try await Self.waitUntilItBegins(writingTo: outputURL, process) }
                // Sleeping, not blocking: a long soak must not hold a thread async tests need.
                try await Task.sleep(for: .microseconds(delay))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                killed += 1
                let output = String(decoding: try Data(contentsOf: outputURL), as: UTF8.self)
                let errors = String(decoding: try Data(contentsOf: errorURL), as: UTF8.self)
                try? FileManager.default.removeItem(at: outputURL)
                try? FileManager.default.removeItem(at: errorURL)
                let label = "run \(run) (seed \(seed), \(durability), killed after \(delay / 1000) ms)"
                if process.terminationReason != .uncaughtSignal {
                    // It exits on its own only when it found something wrong.
                    exitedEarly += 1
                    Issue.record("\(label): the workload exited with status \(process.terminationStatus): \(output.suffix(2000)) \(errors.suffix(2000))")
                    break
                }
                let (transactions, acknowledged, failures) = try Self.parse(output)
                #expect(failures.isEmpty, "\(label): \(failures)")
                // Under `make sanitize` the workload is sanitized too; ThreadSanitizer reports and runs on.
                #expect(!errors.contains("Sanitizer"), "\(label): the workload's sanitizer report: \(errors.suffix(4000))")

                // The recovered counter says how many commits made it; they must be exactly this run's
                // transactions up to it, in counter order, on top of the state the last run left.
                let recovered: Journal.State
                do {
                    let opened = try Store(at: store)
                    recovered = try allRecords(opened)
                    let report = try await opened.verify(VerificationOptions(readData: true))
                    #expect(report.isClean, "\(label): \(report.problems)")
                    try await opened.close()
                } catch {
                    Issue.record("\(label): \(error)")
                    break
                }
                let counter = { (records: Journal.State) in records["counter"].flatMap { Int(String(decoding: $0.value, as: UTF8.self)) } ?? 0 }
                let before = counter(state), after = counter(recovered)
                var expected = state
                var applied = 0
                for transaction in transactions.sorted(by: { $0.counter < $1.counter }) where transaction.counter <= after {
                    #expect(transaction.counter == before + applied + 1, "\(label): commit \(before + applied + 1) is missing from the report")
                    expected = Journal.applying(transaction.changes, to: expected)
                    applied += 1
                }
                for transaction in transactions where acknowledged.contains(transaction.txid) {
                    #expect(transaction.counter <= after, "\(label): acknowledged commit \(transaction.txid) (number \(transaction.counter)) was lost; the store has \(after)")
                }
                guard recovered == expected else {
                    let differing = Set(recovered.keys).union(expected.keys).filter { recovered[$0] != expected[$0] }.sorted()
                    Issue.record("\(label): the store is not the prefix of \(after - before) commits; keys differing: \(differing.prefix(10))")
                    break
                }
                survived += 1
                acknowledgedTotal += acknowledged.count
                inFlightApplied += applied - transactions.filter { acknowledged.contains($0.txid) }.count
                state = recovered
            }
            #expect(survived == kills)
            #expect(acknowledgedTotal > kills, "the workload should commit between kills")
            ReliabilityReport.record("process-crashes", [
                "kills": killed, "survived": survived, "seed": Int(seed), "acknowledgedCommitsChecked": acknowledgedTotal,
                "unacknowledgedCommitsFoundApplied": inFlightApplied, "earlyExits": exitedEarly,
            ], summary: "process crashes: \(killed) kills (seed \(seed)), \(survived) survived, \(acknowledgedTotal) acknowledged commits checked, "
                + "\(inFlightApplied) unacknowledged commits found applied, \(exitedEarly) early exits, in \(ContinuousClock.now - started)")
        }
    }
}
