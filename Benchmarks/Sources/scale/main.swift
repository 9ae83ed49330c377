// `make scale` (swift run -c release scale): issue 19's million-object targets, every round reported.
//
//   open      a store of N blobs, each referenced by a record of its own, closed as an application
//             closes it; timed in a fresh child process per round (wall clock, and the CPU seconds of
//             all its threads, which a loaded machine does not inflate as much), with the resident
//             memory the open added per blob+record
//   gc        10,000 garbage blobs (put, never referenced) collected with a zero grace period, in a
//             fresh copy of the same store each round; the time of those puts, the first after the
//             open, is printed beside it, and that of as many puts again after the collection: the
//             first must cost what the later ones do (no growth of the whole index after an open)
//
// The stores are built once and cached under Benchmarks/.build/scale-stores (CONTENTSTORE_SCALE_CACHE
// overrides); a change of fixtureVersion rebuilds them.
//
//   scale [--sizes 100000,1000000] [--rounds 3] [--garbage 10000] [--cold] [--opens-only]
//
//   --cold        evicts the store's files from the page cache before each open (a first open after a reboot)
//   --opens-only  times the opens alone
//
// Each open prints its CPU split into user and system time, and its page faults: most of the
// system time of an open is first-touch faults of the memory it builds.
import ArgumentParser
import BenchSupport
import ContentStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Bumped whenever the way the stores are built changes, so cached stores are rebuilt.
let fixtureVersion = 1
let blobSize = 128
let recordsPerCommit = 10_000

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Issue 19's million-object targets: open time, resident memory per blob+record, gc cost."
    )
    @Option(name: .customLong("sizes"), help: ArgumentHelp("Store sizes in blobs (each referenced by a record of its own).", valueName: "sizes"))
    var sizeList = CommaSeparated([100_000, 1_000_000])
    @Option(help: "Rounds, each opening (and collecting in) every size.")
    var rounds = 3
    @Option(help: "Garbage blobs each collection removes.")
    var garbage = 10_000
    @Flag(help: "Evict the store's files from the page cache before each open (a first open after a reboot).")
    var cold = false
    @Flag(help: "Time the opens alone (no collections).")
    var opensOnly = false

    func validate() throws {
        guard sizes.allSatisfy({ $0 > 0 }), rounds > 0, garbage > 0 else {
            throw ValidationError("--sizes, --rounds and --garbage need positive numbers")
        }
    }

    var sizes: [Int] { sizeList.values }
}

func configuration() -> Store.Configuration {
    var configuration = Store.Configuration()
    configuration.logger.logLevel = .warning
    configuration.controlSocket = false
    return configuration
}

func key(_ index: Int) -> String { "record/" + String(index) }

/// Distinct 128-byte text-like blobs: the index in the first 8 bytes of a shared block.
struct BlobMaker {
    var block: [UInt8]
    init(seed: UInt64) {
        var generator = ContentGenerator(seed: seed)
        block = generator.textBlock(size: blobSize)
        if block.count > blobSize { block.removeSubrange(blobSize...) }
    }
    mutating func blob(_ index: Int) -> Data {
        withUnsafeBytes(of: UInt64(index) &* 0x9E37_79B9_7F4A_7C15) { tag in
            for i in 0 ..< 8 { block[i] = tag[i] }
        }
        return Data(block)
    }
}

let cacheRoot: String = ProcessInfo.processInfo.environment["CONTENTSTORE_SCALE_CACHE"]
    ?? (URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../.build/scale-stores").standardized.path)

func cachedStore(blobs: Int) throws -> String {
    let directory = cacheRoot + "/v\(fixtureVersion)-\(blobs)"
    if FileManager.default.fileExists(atPath: directory + "/READY") { return directory + "/store" }
    POSIX.removeTree(directory)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let started = monotonicNanoseconds()
    let store = try Store(at: URL(fileURLWithPath: directory + "/store"), configuration: configuration())
    var maker = BlobMaker(seed: 19)
    for start in stride(from: 0, to: blobs, by: recordsPerCommit) {
        let range = start ..< min(start + recordsPerCommit, blobs)
        let digests = try range.map { try store.put(maker.blob($0)) }
        try store.write { transaction in
            for (index, digest) in zip(range, digests) {
                try transaction.setRecord(Record(value: Data("v".utf8), references: [digest]), forKey: key(index))
            }
        }
    }
    try store.close()
    _ = FileManager.default.createFile(atPath: directory + "/READY", contents: nil)
    Progress.log(String(format: "built the %d-blob store in %.1f s (%@)", blobs, Double(monotonicNanoseconds() - started) / 1e9, directory))
    return directory + "/store"
}

/// The process's user and system CPU seconds and its minor and major page faults so far.
func resourceUsage() -> (user: Double, system: Double, minorFaults: Int, majorFaults: Int) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return (seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_minflt, usage.ru_majflt)
}

/// Child process: opens the store, prints "seconds cpuSeconds rssBytes userSeconds systemSeconds
/// minorFaults majorFaults anonymousBytes fileBytes" (resident memory the open added, all of it and
/// split into the process's own memory and mapped files' pages; the rest spent by the open alone).
func openOnce(_ path: String) throws {
    let (before, anonymousBefore, fileBefore) = (ResidentMemory.current, ResidentMemory.anonymous, ResidentMemory.fileBacked)
    let usage = resourceUsage()
    let started = monotonicNanoseconds()
    let store = try Store(at: URL(fileURLWithPath: path), configuration: configuration())
    let seconds = Double(monotonicNanoseconds() - started) / 1e9
    let used = resourceUsage()
    let (after, anonymousAfter, fileAfter) = (ResidentMemory.current, ResidentMemory.anonymous, ResidentMemory.fileBacked)
    try store.close()
    print(seconds, used.user + used.system - usage.user - usage.system, after - before, used.user - usage.user, used.system - usage.system,
          used.minorFaults - usage.minorFaults, used.majorFaults - usage.majorFaults, anonymousAfter - anonymousBefore, fileAfter - fileBefore)
}

struct OpenMeasurement {
    var seconds: Double, cpu: Double, rss: Int, user: Double, system: Double, minorFaults: Int, majorFaults: Int
    /// The part of `rss` that is the process's own memory (the index and records), and the part that
    /// is mapped files' pages (code of the engine and its libraries run for the first time).
    var anonymous: Int, fileBacked: Int
}

/// Evicts the store's files from the page cache (POSIX_FADV_DONTNEED on each, after syncing it):
/// the next open reads them from the disk, as the first open after a reboot would.
func evictFromPageCache(_ path: String) {
    guard let files = FileManager.default.enumerator(atPath: path) else { return }
    for case let file as String in files {
        let descriptor = open(path + "/" + file, O_RDONLY)
        guard descriptor >= 0 else { continue }
        _ = fsync(descriptor)
        _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
        close(descriptor)
    }
}

func measureOpen(_ path: String) throws -> OpenMeasurement {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
    if !FileManager.default.fileExists(atPath: process.executableURL!.path) {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    }
    process.arguments = ["open-once", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let fields = output.split(whereSeparator: \.isWhitespace)
    guard process.terminationStatus == 0, fields.count == 9, let seconds = Double(fields[0]), let cpu = Double(fields[1]),
          let rss = Int(fields[2]), let user = Double(fields[3]), let system = Double(fields[4]), let minor = Int(fields[5]),
          let major = Int(fields[6]), let anonymous = Int(fields[7]), let fileBacked = Int(fields[8]) else {
        throw SystemCallError(call: "open-once", path: path, code: EIO)
    }
    return OpenMeasurement(seconds: seconds, cpu: cpu, rss: rss, user: user, system: system, minorFaults: minor, majorFaults: major,
                           anonymous: anonymous, fileBacked: fileBacked)
}

/// Makes every file under `path` durable, so that write-back of a copy just made does not run
/// during (and get timed with) the collection's own syncs.
func syncTree(_ path: String) throws {
    guard let files = FileManager.default.enumerator(atPath: path) else { return }
    for case let file as String in files {
        let descriptor = open(path + "/" + file, O_RDONLY)
        guard descriptor >= 0 else { continue }
        defer { close(descriptor) }
        try POSIX.fsync(descriptor, path: path + "/" + file)
    }
}

/// Collects `garbage` never-referenced blobs in a fresh copy of the cached store.
func measureCollection(_ path: String, garbage: Int, round: Int) throws -> (seconds: Double, cpu: Double, removed: Int, puts: Double, putsCPU: Double,
                                                                             laterPuts: Double, laterPutsCPU: Double) {
    let copy = try POSIX.scratchDirectory("scale-gc") + "/store"
    defer { POSIX.removeTree((copy as NSString).deletingLastPathComponent) }
    let cp = Process()
    cp.executableURL = URL(fileURLWithPath: "/bin/cp")
    cp.arguments = ["-a", "--reflink=auto", path, copy]
    try cp.run()
    cp.waitUntilExit()
    // A million blobs' copy leaves ~300 MB to write back, a hundred thousand's a tenth of it; left
    // dirty, its write-back would share the disk with the collection's fsyncs and be timed with them.
    try syncTree(copy)
    let store = try Store(at: URL(fileURLWithPath: copy), configuration: configuration())
    var maker = BlobMaker(seed: 1000 + UInt64(round))
    let (putsStarted, putsCPUStarted) = (monotonicNanoseconds(), cpuSeconds())
    for index in 0 ..< garbage { try store.put(maker.blob(index)) }
    let (puts, putsCPU) = (Double(monotonicNanoseconds() - putsStarted) / 1e9, cpuSeconds() - putsCPUStarted)
    let cpu = cpuSeconds()
    let started = monotonicNanoseconds()
    let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
    let seconds = Double(monotonicNanoseconds() - started) / 1e9
    let cpuUsed = cpuSeconds() - cpu
    let (laterStarted, laterCPUStarted) = (monotonicNanoseconds(), cpuSeconds())
    for index in garbage ..< 2 * garbage { try store.put(maker.blob(index)) }
    let (laterPuts, laterPutsCPU) = (Double(monotonicNanoseconds() - laterStarted) / 1e9, cpuSeconds() - laterCPUStarted)
    try store.close()
    return (seconds, cpuUsed, report.blobsRemoved, puts, putsCPU, laterPuts, laterPutsCPU)
}

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "open-once" {
    try openOnce(arguments[2])
    exit(0)
}
let options = Options.parseOrExit()
var stores: [Int: String] = [:]
for size in options.sizes { stores[size] = try cachedStore(blobs: size) }

var opens: [Int: [Double]] = [:], openCPU: [Int: [Double]] = [:], rss: [Int: [Double]] = [:], anonymousRSS: [Int: [Double]] = [:]
var collections: [Int: [Double]] = [:], collectionCPU: [Int: [Double]] = [:], puts: [Int: [Double]] = [:]
for round in 1 ... options.rounds {
    // Sizes alternate their order by round, so a drift in the machine's load does not favour one.
    let order = round % 2 == 1 ? options.sizes : options.sizes.reversed()
    for size in order {
        if options.cold { evictFromPageCache(stores[size]!) }
        let open = try measureOpen(stores[size]!)
        let perEntry = Double(open.rss) / Double(size)
        let anonymousPerEntry = Double(open.anonymous) / Double(size), filePerEntry = Double(open.fileBacked) / Double(size)
        opens[size, default: []].append(open.seconds)
        openCPU[size, default: []].append(open.cpu)
        rss[size, default: []].append(perEntry)
        anonymousRSS[size, default: []].append(anonymousPerEntry)
        var line = String(format: "round %d  %9d blobs  open %.3f s (CPU %.3f s: user %.3f, system %.3f; %d page faults, %d major)  RSS %.0f B per blob+record (own memory %.1f B, code and mapped files %.1f B)",
                          round, size, open.seconds, open.cpu, open.user, open.system, open.minorFaults, open.majorFaults, perEntry,
                          anonymousPerEntry, filePerEntry)
        if !options.opensOnly {
            let gc = try measureCollection(stores[size]!, garbage: options.garbage, round: round)
            collections[size, default: []].append(gc.seconds)
            collectionCPU[size, default: []].append(gc.cpu)
            puts[size, default: []].append(gc.puts)
            line += String(format: "  gc of %d garbage %.3f s (CPU %.3f s)  its puts %.3f s (CPU %.3f s), as many after the gc %.3f s (CPU %.3f s)",
                           gc.removed, gc.seconds, gc.cpu, gc.puts, gc.putsCPU, gc.laterPuts, gc.laterPutsCPU)
        }
        print(line)
    }
}
print("medians over \(options.rounds) rounds:")
for size in options.sizes {
    var line = String(format: "  %9d blobs  open %.3f s (CPU %.3f s)  RSS %.0f B per blob+record (own memory %.1f B)", size, median(opens[size]!),
                      median(openCPU[size]!), median(rss[size]!), median(anonymousRSS[size]!))
    if !options.opensOnly {
        line += String(format: "  gc %.3f s (CPU %.3f s)  first puts %.3f s", median(collections[size]!), median(collectionCPU[size]!),
                       median(puts[size]!))
    }
    print(line)
}
if !options.opensOnly, let small = options.sizes.min(), let large = options.sizes.max(), small != large {
    for (name, times) in [("wall", collections), ("CPU", collectionCPU)] {
        let ratios = zip(times[large]!, times[small]!).map { $0 / $1 }
        print("gc \(name) time ratio \(large) / \(small), per round: " + ratios.map { String(format: "%.2f×", $0) }.joined(separator: " ")
            + String(format: "  (median %.2f×)", median(ratios)))
    }
}
