// callbackget: issue 19's DataArchive callback `get` of 1 KiB against the file-per-key scheme's read,
// round by round in one process, with the CPU and the context switches each call costs.
//
//   swift run -c release callbackget [--seconds S] [--rounds N] [--callers N] [--pause µs]
//
// Each caller thread gets its own 64 keys and waits for each completion before the next call (a
// DispatchSemaphore, as compare's archive workload does). `Store` is the same read without the
// facade (record + verified get), the floor under a callback get.
import ArgumentParser
import BenchSupport
import ContentStore
import DataArchive
import Dispatch
import Foundation

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "callbackget",
        abstract: "DataArchive's callback get of 1 KiB against a file read, with CPU and switches per call."
    )
    @Option(help: "Length of each reader's run, in seconds.")
    var seconds = 0.5
    @Option(help: "Rounds, each running every reader.")
    var rounds = 3
    @Option(help: "Caller threads, each with its own 64 keys.")
    var callers = 1
    @Option(help: "Microseconds each caller sleeps between calls (0: back to back), for callers that read now and then.")
    var pause = 0

    func validate() throws {
        guard seconds > 0, rounds > 0, callers > 0, pause >= 0 else {
            throw ValidationError("--seconds, --rounds and --callers need positive numbers, --pause one ≥ 0")
        }
    }
}

/// Process CPU seconds and context switches (voluntary, involuntary) so far.
func usage() -> (cpu: Double, voluntary: Int, involuntary: Int) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return (seconds(usage.ru_utime) + seconds(usage.ru_stime), usage.ru_nvcsw, usage.ru_nivcsw)
}

/// Runs `call` on `callers` threads until the deadline, each caller with its index; prints one line.
func measure(_ name: String, _ options: Options, _ call: @escaping @Sendable (_ caller: Int, _ index: Int) throws -> Void) -> Double {
    let deadline = monotonicNanoseconds() + UInt64(options.seconds * 1e9)
    let counts = Counts(options.callers)
    let before = usage(), start = monotonicNanoseconds()
    DispatchQueue.concurrentPerform(iterations: options.callers) { caller in
        var count = 0
        while monotonicNanoseconds() < deadline {
            do { try call(caller, count) } catch { fatalError("\(name): \(error)") }  // a benchmark: stop at once
            count += 1
            if options.pause > 0 { usleep(UInt32(options.pause)) }
        }
        counts.set(caller, count)
    }
    let elapsed = Double(monotonicNanoseconds() - start) / 1e9, after = usage()
    let calls = Double(counts.total)
    let rate = calls / elapsed
    print(String(format: "  %-10@ %9.0f/s  wall %6.2f µs  cpu %6.2f µs/call  switches %.3f vol + %.3f invol /call",
                 name, rate, elapsed * 1e6 / calls * Double(options.callers), (after.cpu - before.cpu) * 1e6 / calls,
                 Double(after.voluntary - before.voluntary) / calls, Double(after.involuntary - before.involuntary) / calls))
    return rate
}

final class Counts: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [Int]
    init(_ n: Int) { counts = Array(repeating: 0, count: n) }
    func set(_ index: Int, _ value: Int) { lock.lock(); counts[index] = value; lock.unlock() }
    var total: Int { lock.lock(); defer { lock.unlock() }; return counts.reduce(0, +) }
}

let options = Options.parseOrExit()
let directory = try POSIX.scratchDirectory("callbackget")
defer { POSIX.removeTree(directory) }
let store = try Store(at: URL(fileURLWithPath: directory + "/store"))
let archive = DataArchive(store: store)
let semaphores = (0 ..< options.callers).map { _ in DispatchSemaphore(value: 0) }  // one per caller, as compare's
let keys = (0 ..< options.callers).map { caller in (0 ..< 64).map { "doc-1KiB-\(caller)-\($0)" } }
let values = ArchiveValues1K()
let filesRoot = directory + "/files/data_archive"
for key in keys.joined() {
    let value = values.next()
    let written = DispatchSemaphore(value: 0)
    archive.set(key: key, data: value) { result in
        precondition(result.isSuccess, "set \(key): \(result)")
        written.signal()
    }
    written.wait()
    try POSIX.makeDirectory(filesRoot + "/" + key)
    try value.withUnsafeBytes { try POSIX.writeFile(filesRoot + "/" + key + "/0.dat", $0, sync: false) }
}
sync()

print("callbackget: \(options.callers) caller(s), \(options.seconds) s per run, \(ProcessInfo.processInfo.activeProcessorCount) cores")
for round in 1 ... options.rounds {
    print("round \(round)")
    let callback = measure("callback", options) { caller, index in
        let key = keys[caller][index % 64]
        let done = semaphores[caller]
        archive.get(key: key) { data, result in
            precondition(data != nil && result.isSuccess, "get \(key): \(result)")
            done.signal()
        }
        done.wait()
    }
    // The lane claim and record read of a callback read, without its blob and its hand-off.
    _ = measure("lane+rec", options) { caller, index in
        _ = archive.numberOfArchives(key: keys[caller][index % 64])
    }
    let files = measure("file", options) { caller, index in
        let key = keys[caller][index % 64]
        guard try POSIX.readFile(filesRoot + "/" + key + "/0.dat") != nil else { fatalError("file \(key) missing") }
    }
    _ = measure("Store", options) { caller, index in
        let key = "dataarchive/" + keys[caller][index % 64]
        guard let digest = try store.record(forKey: key)?.references.first else { return }
        _ = try store.get(digest)
    }
    print(String(format: "  callback / file: %.2f×", callback / files))
}
try store.close()

/// Distinct 1 KiB text values.
final class ArchiveValues1K {
    private var counter: UInt64 = 0
    private let base: Data = {
        var generator = ContentGenerator(seed: 7)
        return Data(generator.textBlock(size: 1024))
    }()
    func next() -> Data {
        counter += 1
        var value = base
        value.withUnsafeMutableBytes { $0.storeBytes(of: counter, as: UInt64.self) }
        return value
    }
}
