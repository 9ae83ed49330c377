// `facadespeed`: issue 20's and 21's speed targets measured as wall-clock ratios on a shared
// machine. Every contender runs in every round, in an order rotated by round, so a burst of load
// from other processes hits all of them alike; each round prints its medians and its ratios, and
// the thread CPU time (which waiting for a core or for the disk does not inflate) beside them.
//
//   swift build -c release --product facadespeed && .build/release/facadespeed [rounds] [ops per round]
//
// Contenders (each on its own store or file, all in one scratch directory):
// - `1KiB`: a durable commit of a 1 KiB record (the targets' unit);
// - `lens`: StateLens, one field of a ~1 MB state updated (target ≤ 2× `1KiB`);
// - `file`: the same change made POSLens's way, made durable: the whole state encoded and written
//   to a file with fsync, then renamed;
// - `p.write`, `p.undo`, `p.redo`: Persist, one entity of a graph of 100,000 saved, undone, redone
//   (each target ≤ 2× `1KiB`); `p.1KiB`: the 1 KiB commit on Persist's store of ~400,000 records;
// - `g.write`, `g.undo`, `g.redo`: the same in SQLite (GRDB, WAL, synchronous FULL) with its own
//   undo table, as the original Persist did;
// and, per round, `value` of a 64-field state (target ≤ 100 ns) beside the cost of copying the same
// struct out of a class (the floor for any read that returns a copy).
import ArgumentParser
import BenchSupport
import ContentStore
import Foundation
import StateLens

/// The command line: `facadespeed [rounds] [ops per round]`.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "facadespeed",
        abstract: "Issues 20's and 21's targets: StateLens and Persist against a durable 1 KiB commit, rounds interleaved."
    )
    @Argument(help: "Rounds, each running every contender.")
    var rounds = 10
    @Argument(help: "Timed operations of each contender per round.")
    var operations = 20

    func validate() throws {
        guard rounds > 0, operations > 0 else { throw ValidationError("rounds and operations need positive numbers") }
    }
}

let options = Options.parseOrExit()
let (rounds, operations) = (options.rounds, options.operations)

/// One operation's wall and thread-CPU time, in microseconds.
struct Sample {
    var wall: Double
    var cpu: Double
}

func measure(_ body: () throws -> Void) rethrows -> Sample {
    let (cpu, wall) = (threadCPUSeconds(), monotonicNanoseconds())
    try body()
    return Sample(wall: Double(monotonicNanoseconds() - wall) / 1e3, cpu: (threadCPUSeconds() - cpu) * 1e6)
}

/// The reference: one durable commit of a 1 KiB record on `store` (the value's first 8 bytes are
/// `counter`, so every commit changes it), timed.
func commitKibibyte(on store: Store, counter: Int) throws -> Sample {
    var value = Data(repeating: 0x61, count: 1024)
    withUnsafeBytes(of: counter) { value.replaceSubrange(0 ..< 8, with: $0) }
    return try measure { try store.write { try $0.setRecord(Record(value: value), forKey: "baseline") } }
}

/// A contender: named timed operations run in order (write, undo, redo), with untimed preparation
/// it does itself.
struct Contender {
    var names: [String]
    var run: () throws -> [Sample]

    init(name: String, run: @escaping () throws -> Sample) {
        names = [name]
        self.run = { [try run()] }
    }

    init(names: [String], run: @escaping () throws -> [Sample]) {
        self.names = names
        self.run = run
    }
}

Progress.log("setting up (the Persist and SQLite graphs of 100,000 take a while)")
let lens = try LensContenders()
// FACADESPEED_LENS_ONLY=1: StateLens and the commit alone (quick to set up, for a profiler);
// FACADESPEED_PERSIST_ONLY=1: Persist and the commit alone, no SQLite graph.
let lensOnly = ProcessInfo.processInfo.environment["FACADESPEED_LENS_ONLY"] != nil
let persistOnly = ProcessInfo.processInfo.environment["FACADESPEED_PERSIST_ONLY"] != nil
let persist = lensOnly ? nil : try PersistContenders()
let sqlite = lensOnly || persistOnly ? nil : try SQLiteContenders()
let contenders: [Contender] = (persistOnly ? Array(lens.contenders.prefix(1)) : lens.contenders)
    + (persist?.contenders ?? []) + (sqlite?.contenders ?? [])
let names = contenders.flatMap(\.names)  // "1KiB" first: the unit of every ratio
var all: [String: [Sample]] = [:]

for round in 1 ... rounds {
    var samples: [String: [Sample]] = [:]
    for repetition in 0 ..< operations {
        let shift = (round + repetition) % contenders.count
        for contender in contenders[shift...] + contenders[..<shift] {
            for (name, sample) in zip(contender.names, try contender.run()) { samples[name, default: []].append(sample) }
        }
    }
    let reads = lens.readCost()
    let unit = samples["1KiB"]!
    print("round \(round): " + names.map { "\($0) \(fixed(median(samples[$0]!.map(\.wall)), 0))/\(fixed(median(samples[$0]!.map(\.cpu)), 0)) µs" }.joined(separator: ", ")
        + " (wall/CPU medians of \(operations))")
    print("  ratios to 1KiB (wall; CPU): " + names.dropFirst().map { name in
        "\(name) \(fixed(median(samples[name]!.map(\.wall)) / median(unit.map(\.wall)), 2))×; \(fixed(median(samples[name]!.map(\.cpu)) / median(unit.map(\.cpu)), 1))×"
    }.joined(separator: ", "))
    print("  value of a 64-field state: \(fixed(reads.value.wall, 1)) ns wall, \(fixed(reads.value.cpu, 1)) ns CPU; "
        + "the struct copied from a class: \(fixed(reads.floor.wall, 1)) ns wall, \(fixed(reads.floor.cpu, 1)) ns CPU; "
        + "a member lens (root.number3): \(fixed(reads.member.wall, 1)) ns wall")
    for (name, values) in samples { all[name, default: []] += values }
}

print("all rounds, wall p0 / p50 / p90 (thread CPU p50) in µs:")
for name in names {
    let wall = all[name]!.map(\.wall).sorted(), cpu = all[name]!.map(\.cpu).sorted()
    print("  \(name): \(fixed(wall[0], 0)) / \(fixed(Summary.quantile(wall, 0.5), 0)) / \(fixed(Summary.quantile(wall, 0.9), 0)) (\(fixed(Summary.quantile(cpu, 0.5), 0)))")
}
lens.remove()
persist?.remove()
sqlite?.remove()

func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
