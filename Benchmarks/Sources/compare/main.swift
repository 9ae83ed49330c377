import BenchSupport
import ContentStore
import Foundation
import Synchronization

// The comparison runner: the same workloads on each contender, alternating within every round,
// with the machine's limits probed in every round too. See Docs/benchmarks/README.md.

let started = monotonicNanoseconds()
let options = Options.parseOrExit()
/// The store-engine workloads (issue 7) need the corpus (and the limit probes, `Options.probeLimits`);
/// the facade and versions workloads do not.
let engineWorkloads = ["ingest", "commits", "reads"].contains { options.includes(workload: $0) }
let cores = ProcessInfo.processInfo.activeProcessorCount
let scratch = try POSIX.scratchDirectory("compare")
defer { if !options.keepScratch { POSIX.removeTree(POSIX.scratchRoot) } }
Progress.log("scratch directory \(scratch); \(options.rounds) rounds; \(cores) cores")

// MARK: Inputs

let generatedMB = engineWorkloads ? options.corpusMB : 1
Progress.log("generating a \(generatedMB) MB corpus")
let corpus = try Corpus.generate(at: scratch + "/corpus", totalBytes: generatedMB * 1_000_000)
Progress.log(String(format: "corpus: %d files, %.1f MB, %.1f MB unique (text %.0f, source %.0f, binary %.0f, duplicates %.0f MB)",
                    corpus.files.count, Double(corpus.totalBytes) / 1e6, Double(corpus.uniqueBytes) / 1e6,
                    Double(corpus.bytes(of: .text)) / 1e6, Double(corpus.bytes(of: .source)) / 1e6,
                    Double(corpus.bytes(of: .binary)) / 1e6, Double(corpus.bytes(of: .duplicate)) / 1e6))
var generator = ContentGenerator(seed: 42)
/// The bytes of ContentStore's read cache in the point-read rows that have one; SQLite's page cache gets as many in "equal memory budgets".
let readCacheBytes = options.readCacheMiB.map { $0 << 20 } ?? Store.Configuration().readCacheSize
/// The blobs of the "read set 3× the cache" row: the point-read stores hold at least as many, and
/// the other rows read the first `options.readBlocks` of them.
let thriceCacheBlocks = 3 * readCacheBytes / 4096
let blocks = (0 ..< max(options.readBlocks, thriceCacheBlocks)).map { _ in generator.textBlock(size: 4096) }
let probe = try LimitProbe(corpus: corpus, readBlocks: blocks, scratch: scratch)

// The 10% of files deleted before collection: the same for every contender.
let deletedPaths: [String] = {
    var random = DeterministicRandom(seed: 99)
    var indices = Array(corpus.files.indices)
    for i in indices.indices.reversed() { indices.swapAt(i, random.below(i + 1)) }
    return indices.prefix(corpus.files.count / 10).map { corpus.files[$0].path }
}()

/// The stored (zstd -3) bytes of blobs that only the deleted files reference: all a collector can win back.
let garbageStoredBytes: Int = {
    let deleted = Set(deletedPaths)
    var referencedByLive = Set<Int>()
    for (index, file) in corpus.files.enumerated() where !deleted.contains(file.path) {
        referencedByLive.insert(file.original ?? index)
    }
    var total = 0
    var seen = Set<Int>()
    for (index, file) in corpus.files.enumerated() where deleted.contains(file.path) {
        let blob = file.original ?? index
        guard !referencedByLive.contains(blob), seen.insert(blob).inserted else { continue }
        total += probe.files[blob].withUnsafeBytes { ZstdCodec.compress($0)?.count ?? $0.count }
    }
    return total
}()

// MARK: Contenders

typealias Factory = @Sendable (String) throws -> any Contender
let readCacheMiB = options.readCacheMiB
let allBuiltIns: [(name: String, make: Factory)] = [
    (Name.contentStore, { try ContentStoreContender(directory: $0, readCacheMiB: readCacheMiB) }),
    (Name.sqlite, { try SQLiteContender(directory: $0) }),
    (Name.filePerKey, { try FilePerKeyContender(directory: $0) }),
]
let builtIns = allBuiltIns.filter { options.includes(contender: $0.name) }
var tools: [String: String] = [:]
var skipped: [String: String] = [:]
/// The command-line tools each workload runs: restic and git ingest the corpus, restic and borg store versions.
var externals: [ExternalTool] = []
var versionTools: [ExternalTool] = []
for name in [Name.restic, Name.git, Name.borg] where options.includes(contender: name) {
    let ingests = name != Name.borg && options.includes(workload: "ingest")
    let storesVersions = name != Name.git && options.includes(workload: "versions")
    guard ingests || storesVersions else { continue }
    guard options.external else {
        skipped[name] = "skipped with --no-external"
        continue
    }
    let tool = ExternalTool.locate(name, name: name)
    if let reason = tool.skipReason {
        skipped[name] = reason
        Progress.log("\(name): \(reason)")
    } else {
        tools[name] = tool.version
        if ingests { externals.append(tool) }
        if storesVersions { versionTools.append(tool) }
    }
}

/// `items` rotated by `round`, so every contender takes every position in turn.
func rotated<T>(_ items: [T], by round: Int) -> [T] {
    guard !items.isEmpty else { return items }
    let k = round % items.count
    return Array(items[k...] + items[..<k])
}

// MARK: Measurements

let mb = 1e6
var ingest = Measurement(id: "ingest", workload: "bulk ingest", unit: "MB/s", higherIsBetter: true)
var ingestNoKDF = Measurement(id: "ingest-no-kdf", workload: "bulk ingest, restic's key derivation subtracted", unit: "MB/s", higherIsBetter: true,
                              note: "restic's ingest seconds minus the same round's `restic cat config` seconds (the row below); ContentStore's figure is its bulk ingest unchanged: it derives no key")
var resticKDF = Measurement(id: "ingest-restic-kdf", workload: "restic's key derivation: `restic cat config`", unit: "s", higherIsBetter: false,
                            note: "a process that opens the repository, derives its key with scrypt (parameters calibrated by `restic init` to about 0.5 s on the machine) and prints the config: the fixed cost each `restic backup` pays before it stores anything")
var ingestCPU = Measurement(id: "ingest-cpu", workload: "bulk ingest: CPU time", unit: "CPU s", higherIsBetter: false,
                            note: "user + system CPU seconds of the ingest (restic and git: of their processes); not what limits wall time on a loaded machine")
var ingestCPUWithIO = Measurement(id: "ingest-cpu-io", workload: "bulk ingest: CPU time, against compute + the I/O it must do", unit: "CPU s", higherIsBetter: false)
var ingestBreakdown: [[String: Double]] = []
var ingestSize = Measurement(id: "ingest-size", workload: "bulk ingest: bytes on disk", unit: "MB", higherIsBetter: false)
var reingest = Measurement(id: "reingest", workload: "re-ingest, unchanged (dedup)", unit: "MB/s", higherIsBetter: true)
var collect = Measurement(id: "gc", workload: "delete 10% + collect", unit: "s", higherIsBetter: false,
                          note: "ContentStore: default collection, which drops the blobs from the index but rewrites a pack only once 50% of it is dead (and never the active pack), so it returns no disk space here; no ratio is given. SQLite: DELETE + VACUUM")
var collectCompacted = Measurement(id: "gc-compacted", workload: "delete 10% + collect, then compact", unit: "s", higherIsBetter: false,
                                   note: "ContentStore: default collection, then a second with pack rewrite threshold 0.01; peers as above (one step)")
var reclaimed = Measurement(id: "gc-reclaimed", workload: "delete 10% + collect: disk bytes reclaimed", unit: "MB", higherIsBetter: true)
var reclaimedCompacted = Measurement(id: "gc-reclaimed-compacted", workload: "… then compact: disk bytes reclaimed", unit: "MB", higherIsBetter: true)
var commits1 = Measurement(id: "commits-1", workload: "durable commits, 1 writer", unit: "commits/s", higherIsBetter: true)
var commits16 = Measurement(id: "commits-16", workload: "durable commits, 16 writers", unit: "commits/s", higherIsBetter: true)
var reads = Measurement(id: "reads", workload: "random 4 KiB point reads", unit: "ops/s", higherIsBetter: true)
var readsP50 = Measurement(id: "reads-p50", workload: "random 4 KiB point reads: p50", unit: "µs", higherIsBetter: false)
var readsP99 = Measurement(id: "reads-p99", workload: "random 4 KiB point reads: p99", unit: "µs", higherIsBetter: false)
var readsUncached = Measurement(id: "reads-uncached", workload: "random 4 KiB point reads, ContentStore's read cache off", unit: "ops/s", higherIsBetter: true)
var readsUncachedP99 = Measurement(id: "reads-uncached-p99", workload: "… its p99", unit: "µs", higherIsBetter: false)
var readsEqualMemory = Measurement(id: "reads-equal-memory", workload: "random 4 KiB point reads, equal memory budgets", unit: "ops/s", higherIsBetter: true)
var readsThriceCache = Measurement(id: "reads-3x-cache", workload: "random 4 KiB point reads, read set 3× ContentStore's read cache", unit: "ops/s", higherIsBetter: true)
var readsThriceCacheCPU = Measurement(id: "reads-3x-cache-cpu", workload: "… its CPU per read", unit: "µs", higherIsBetter: false)
var readsUncachedCPU = Measurement(id: "reads-uncached-cpu", workload: "random 4 KiB point reads, ContentStore's read cache off: CPU per read", unit: "µs", higherIsBetter: false)
var contentStoreStatistics: [String: Double] = [:]
var limitRounds: [MachineLimits] = []
let corpusMB = Double(corpus.totalBytes) / mb
let commitValue = Data((0 ..< 100).map { UInt8(truncatingIfNeeded: $0 &* 37) })

// Point-read stores are built once and read in every round. Each store feeds the rows (measurement
// ids) whose memory budget it has: the default caches ("reads"), ContentStore's cache off
// ("reads-uncached": every read decodes and verifies, as SQLite's and the files' do), and SQLite's
// page cache as large as ContentStore's read cache ("reads-equal-memory").
struct PointReadStore {
    var column: String
    var variant: String
    var rows: Set<String>
    var make: Factory
}
let pointReadStores: [PointReadStore] = [
    PointReadStore(column: Name.contentStore, variant: "default cache", rows: ["reads", "reads-equal-memory", "reads-3x-cache"],
                   make: { try ContentStoreContender(directory: $0, readCacheMiB: readCacheMiB) }),
    PointReadStore(column: Name.contentStore, variant: "cache off", rows: ["reads-uncached"],
                   make: { try ContentStoreContender(directory: $0, readCacheMiB: 0) }),
    PointReadStore(column: Name.sqlite, variant: "default cache_size", rows: ["reads", "reads-uncached", "reads-3x-cache"],
                   make: { try SQLiteContender(directory: $0) }),
    PointReadStore(column: Name.sqlite, variant: "cache_size = readCacheSize", rows: ["reads-equal-memory"],
                   make: { [readCacheBytes] in try SQLiteContender(directory: $0, cacheBytes: readCacheBytes) }),
    PointReadStore(column: Name.filePerKey, variant: "page cache", rows: ["reads", "reads-uncached"],
                   make: { try FilePerKeyContender(directory: $0) }),
]
var readers: [(name: String, variant: String, rows: Set<String>, contender: any Contender, digests: [Digest])] = []
for (index, store) in pointReadStores.enumerated() where options.includes(workload: "reads") && options.includes(contender: store.column) {
    Progress.log("point reads: storing \(blocks.count) blobs of 4 KiB in \(store.column) (\(store.variant))")
    let contender = try store.make(try POSIX.scratchDirectory("compare/reads-\(index)"))
    let digests = try blocks.map { try contender.put($0) }
    try contender.finishPuts()
    readers.append((store.column, store.variant, store.rows, contender, digests))
}
sync()

// Issues 4, 5 and 8: the facades and versions of a large file (their stores are set up once).
var warehouse = options.includes(workload: "warehouse") ? try WarehouseWorkload(options: options) : nil
var archive = options.includes(workload: "archive") ? try ArchiveWorkload(options: options) : nil
var versions = options.includes(workload: "versions") ? VersionsWorkload(options: options, tools: versionTools) : nil

for round in 0 ..< options.rounds {
    let label = "round \(round + 1)/\(options.rounds)"

    // Limits, probed in this round.
    if options.probeLimits {
        Progress.log("\(label): machine limits")
        let limits = try probe.run()
        limitRounds.append(limits)
        ingestSize.recordLimit(round: round, Double(limits.zstdStoredBytes) / mb)
        ingestCPU.recordLimit(round: round, limits.ingestCPUSeconds)
        ingestCPUWithIO.recordLimit(round: round, limits.ingestWithIOCPUSeconds)
        reclaimed.recordLimit(round: round, Double(garbageStoredBytes) / mb)
        reclaimedCompacted.recordLimit(round: round, Double(garbageStoredBytes) / mb)
        Progress.log(String(format: "%@: per core SHA-256 %.0f MB/s, zstd-3 %.0f MB/s (CPU time); on %d threads now: ingest compute %.0f MB/s, hashing %.0f MB/s; write %.0f MB/s; append+fdatasync %.3f ms, overwrite+fdatasync %.3f ms; verified 4 KiB decode %.0f/s",
                            label, limits.sha256MBpsPerCore, limits.zstdMBpsPerCore, cores,
                            Double(corpus.totalBytes) / 1e6 / limits.ingestComputeSeconds,
                            Double(corpus.totalBytes) / 1e6 / limits.reingestComputeSeconds,
                            limits.writeMBps, limits.appendSyncMedianMs, limits.overwriteSyncMedianMs, limits.pointReadOpsPerSecond))
    }

    // 1, 2, 5: ingest, re-ingest, delete + collect.
    let entrants: [(name: String, make: Factory?, tool: ExternalTool?)] =
        builtIns.map { ($0.name, $0.make, nil) } + externals.map { ($0.name, nil, $0) }
    if options.includes(workload: "ingest") {
        // Every contender reads the corpus from the page cache, as the limit assumes: left idle
        // through the other workloads, part of it was reclaimed, and the first contender would
        // otherwise pay for reading it back from disk.
        _ = try corpus.readEveryFile()
    }
    for entrant in rotated(entrants, by: round) where options.includes(workload: "ingest") {
        let directory = try POSIX.scratchDirectory("compare/run")
        if let tool = entrant.tool {
            let cpuBefore = cpuSeconds(children: true)
            let seconds = try tool.ingest(corpus, into: directory)
            ingest.record(entrant.name, round: round, corpusMB / seconds)
            ingestCPU.record(entrant.name, round: round, cpuSeconds(children: true) - cpuBefore)
            ingestSize.record(entrant.name, round: round, Double(tool.repositorySize(directory)) / mb)
            var keyDerivation = ""
            if entrant.name == Name.restic {
                let kdf = try tool.keyDerivationSeconds(repository: directory)
                resticKDF.record(entrant.name, round: round, kdf)
                if seconds > kdf { ingestNoKDF.record(entrant.name, round: round, corpusMB / (seconds - kdf)) }
                keyDerivation = String(format: "; key derivation (`cat config`) %.2f s", kdf)
            }
            Progress.log(String(format: "%@: %@ ingest %.1f MB/s (%.2f CPU s)%@", label, entrant.name, corpusMB / seconds, ingestCPU.rounds[entrant.name]?[round] ?? 0, keyDerivation))
        } else if let make = entrant.make {
            if options.probeLimits && entrant.name == Name.contentStore, var limits = limitRounds.last {
                // The compute bound, probed right before ContentStore's run (the load changes by the second).
                (limits.ingestComputeSeconds, limits.reingestComputeSeconds) = try probe.computeSeconds()
                limitRounds[limitRounds.count - 1] = limits
                ingest.recordLimit(round: round, limits.ingestMBps(totalBytes: corpus.totalBytes))
                reingest.recordLimit(round: round, limits.reingestMBps(totalBytes: corpus.totalBytes))
            }
            let contender = try make(directory)
            let cpuBefore = cpuSeconds()
            let first = try measureSeconds { try contender.ingest(corpus, threads: options.ingestThreads) }
            let cpu = cpuSeconds() - cpuBefore
            let size = POSIX.diskUsage(directory)
            ingest.record(entrant.name, round: round, corpusMB / first)
            if entrant.name == Name.contentStore && externals.contains(where: { $0.name == Name.restic }) {
                ingestNoKDF.record(entrant.name, round: round, corpusMB / first)
            }
            ingestCPU.record(entrant.name, round: round, cpu)
            if entrant.name == Name.contentStore { ingestCPUWithIO.record(entrant.name, round: round, cpu) }
            var breakdown = ""
            if let store = contender as? ContentStoreContender {
                let (put, commit) = (store.putTime.take(), store.commitTime.take())
                let workers = store.workerCPU.withLock { value in defer { value = 0 }; return value }
                ingestBreakdown.append(["round": Double(round + 1), "seconds": first, "cpuSeconds": cpu, "workerCPUSeconds": workers,
                                        "threadSecondsInPut": put, "threadSecondsInCommit": commit])
                breakdown = String(format: " [%.2f s wall; CPU %.2f s, of which the %d workers %.2f s; thread-seconds in put %.2f, in commit %.2f]",
                                   first, cpu, cores, workers, put, commit)
            }
            ingestSize.record(entrant.name, round: round, Double(size) / mb)
            if round == 0, let store = (contender as? ContentStoreContender)?.store {
                let statistics = try store.statistics()
                contentStoreStatistics = [
                    "blobCount": Double(statistics.blobCount), "logicalBytes": Double(statistics.logicalBytes),
                    "storedBytes": Double(statistics.storedBytes), "packCount": Double(statistics.packCount),
                    "walBytes": Double(statistics.walBytes), "recordCount": Double(statistics.recordCount),
                ]
            }
            let second = try measureSeconds { try contender.ingest(corpus, threads: options.ingestThreads) }
            if let store = contender as? ContentStoreContender {
                _ = (store.putTime.take(), store.commitTime.take(), store.workerCPU.withLock { value in defer { value = 0 }; return value })
            }
            reingest.record(entrant.name, round: round, corpusMB / second)
            let before = POSIX.diskUsage(directory)
            let steps = try contender.deleteAndCollect(deletedPaths) { POSIX.diskUsage(directory) }
            let total = steps.reduce(0) { $0 + $1.seconds }
            collect.record(entrant.name, round: round, steps[0].seconds)
            reclaimed.record(entrant.name, round: round, (Double(before) - Double(steps[0].diskBytesAfter)) / mb)
            collectCompacted.record(entrant.name, round: round, total)
            reclaimedCompacted.record(entrant.name, round: round, (Double(before) - Double(steps.last!.diskBytesAfter)) / mb)
            try contender.close()
            Progress.log(String(format: "%@: %@ ingest %.1f MB/s (%.1f MB on disk, %.2f CPU s)%@, re-ingest %.1f MB/s, %@",
                                label, entrant.name, corpusMB / first, Double(size) / mb, cpu, breakdown, corpusMB / second,
                                steps.map { String(format: "%@ %.2f s", $0.name, $0.seconds) }.joined(separator: ", ")))
        }
        POSIX.removeTree(directory)
        sync()  // the next contender must not pay for this one's write-back
    }

    // 3: durable small commits. ContentStore's bound is the sync latency probed right before its run.
    for entrant in rotated(builtIns, by: round) where options.includes(workload: "commits") {
        for writers in [1, 16] {
            if options.probeLimits && entrant.name == Name.contentStore {
                let bound = Double(writers) / (try probe.syncFloorMs() / 1000)
                if writers == 1 { commits1.recordLimit(round: round, bound) } else { commits16.recordLimit(round: round, bound) }
            }
            let directory = try POSIX.scratchDirectory("compare/run")
            let contender = try entrant.make(directory)
            let committed = Atomic<Int>(0)
            let deadline = monotonicNanoseconds() + UInt64(options.commitSeconds * 1e9)
            let seconds = try measureSeconds {
                try runThreads(writers) { writer in
                    var count = 0
                    var value = commitValue
                    while monotonicNanoseconds() < deadline {
                        // A new value every time: a store may (and ContentStore does) skip a set that changes nothing.
                        value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(count), as: UInt64.self) }
                        try contender.commit(key: "writer\(writer)/key\(count % 1024)", value: value)
                        count += 1
                    }
                    committed.add(count, ordering: .relaxed)
                }
            }
            let rate = Double(committed.load(ordering: .relaxed)) / seconds
            if writers == 1 { commits1.record(entrant.name, round: round, rate) } else { commits16.record(entrant.name, round: round, rate) }
            try contender.close()
            POSIX.removeTree(directory)
            sync()
            Progress.log(String(format: "%@: %@ durable commits, %d writer%@: %.0f/s", label, entrant.name, writers, writers == 1 ? "" : "s", rate))
        }
    }

    // 4: random 4 KiB point reads, one thread, one read per get.
    for reader in rotated(readers, by: round) {
        if options.probeLimits && reader.name == Name.contentStore {
            let rate = try probe.pointReadOpsPerSecond()
            if reader.rows.contains("reads") {
                reads.recordLimit(round: round, rate)
                if var limits = limitRounds.last {
                    limits.pointReadOpsPerSecond = rate
                    limitRounds[limitRounds.count - 1] = limits
                }
            }
            if reader.rows.contains("reads-uncached") { readsUncached.recordLimit(round: round, rate) }
        }
        // Every blob once first: the store sat idle through the other workloads, and this machine
        // reclaims page-cache pages left idle for about half a minute, so without this the peers
        // would read part of their files back from disk.
        for digest in reader.digests { _ = try reader.contender.read(digest) }
        let (rate, summary) = try timedReads(reader.contender, reader.digests.prefix(options.readBlocks), seconds: options.readSeconds, seed: UInt64(round) &+ 1000)
        if reader.rows.contains("reads") {
            reads.record(reader.name, round: round, rate)
            readsP50.record(reader.name, round: round, summary.median)
            readsP99.record(reader.name, round: round, summary.p99)
        }
        if reader.rows.contains("reads-uncached") {
            readsUncached.record(reader.name, round: round, rate)
            readsUncachedP99.record(reader.name, round: round, summary.p99)
            readsUncachedCPU.record(reader.name, round: round, summary.cpuPerRead)
        }
        if reader.rows.contains("reads-equal-memory") { readsEqualMemory.record(reader.name, round: round, rate) }
        Progress.log(String(format: "%@: %@ (%@) point reads %.0f/s, p50 %.1f µs, p99 %.1f µs, CPU %.2f µs a read", label, reader.name, reader.variant,
                            rate, summary.median, summary.p99, summary.cpuPerRead))
        if reader.rows.contains("reads-3x-cache") && thriceCacheBlocks > 0 {
            let (rate, summary) = try timedReads(reader.contender, reader.digests.prefix(thriceCacheBlocks), seconds: options.readSeconds, seed: UInt64(round) &+ 2000)
            readsThriceCache.record(reader.name, round: round, rate)
            readsThriceCacheCPU.record(reader.name, round: round, summary.cpuPerRead)
            Progress.log(String(format: "%@: %@ (%@) point reads of %d blobs (3× the read cache) %.0f/s, p50 %.1f µs, CPU %.2f µs a read", label, reader.name,
                                reader.variant, thriceCacheBlocks, rate, summary.median, summary.cpuPerRead))
        }
    }

    if round < options.facadeRounds {
        try warehouse?.run(round: round, label: label)
        try archive?.run(round: round, label: label)
    }
    try versions?.run(round: round, label: label)
}
for reader in readers { try reader.contender.close() }

/// Reads uniformly random blobs of `digests` for `seconds`, one thread, one read per get; returns
/// the rate and the latencies in µs.
/// The reads' latencies and the reading thread's CPU time per read: on a loaded machine the rate and
/// the tail measure time spent descheduled, while the CPU time stays close to the work of a read.
struct TimedReads {
    var latencies: Summary
    var cpuPerRead: Double
    var median: Double { latencies.median }
    var p99: Double { latencies.p99 }
}

func timedReads(_ contender: any Contender, _ digests: ArraySlice<Digest>, seconds: Double, seed: UInt64) throws -> (Double, TimedReads) {
    var random = DeterministicRandom(seed: seed)
    var latencies: [Double] = []
    latencies.reserveCapacity(1 << 20)
    let cpuStart = threadCPUSeconds()
    let start = monotonicNanoseconds()
    let deadline = start + UInt64(seconds * 1e9)
    var now = start
    while now < deadline {
        let digest = digests[digests.startIndex + random.below(digests.count)]
        let before = now
        _ = try contender.read(digest)
        now = monotonicNanoseconds()
        latencies.append(Double(now - before) / 1000)
    }
    let cpuPerRead = (threadCPUSeconds() - cpuStart) / Double(max(1, latencies.count)) * 1e6
    return (Double(latencies.count) / (Double(now - start) / 1e9), TimedReads(latencies: Summary(latencies), cpuPerRead: cpuPerRead))
}
try warehouse?.close()
try archive?.close()

// MARK: Report

ingest.limitNote = "SHA-256 of all bytes + zstd -3 of unique bytes on \(cores) threads (from memory, probed right before ContentStore's run), or the stored bytes at the write bandwidth if slower"
ingestSize.limitNote = "zstd -3 of each unique file"
ingestCPU.limitNote = "SHA-256 of all bytes + zstd -3 of unique bytes, CPU seconds"
ingestCPUWithIO.limitNote = "the row above's limit plus reading every corpus file from the page cache and writing the stored bytes (a pwrite per unique file, one fdatasync), CPU seconds: an ingest with no index, log, checksum, chunking or locking"
reingest.limitNote = "SHA-256 of all bytes on \(cores) threads (from memory, probed right before ContentStore's run)"
commits1.limitNote = "1 / the cheapest durable write (fdatasync after a 128-byte append or a 4 KiB overwrite), probed right before each run"
commits16.limitNote = "16 / the cheapest durable write, probed right before each run: one sync shared by all 16 writers"
reads.limitNote = "zstd decode + SHA-256 of a 4 KiB blob from memory, 1 core, probed right before ContentStore's run; a read-cache hit does neither, so this row can pass it"
readsUncached.limitNote = "the same probe, right before this row's ContentStore run: every read here does that work"
reads.note = String(format: "%d blobs of 4 KiB (%.0f MB decoded) read uniformly at random, one thread; each contender with its default cache: ContentStore's read cache holds %d MiB of verified blobs, decoded (a blob whose frame is under 0.4 of it as that frame, once the cache is full: these 4 KiB text blocks compress to about half, so they stay decoded), SQLite's page cache 2,000 KiB per connection (pages of compressed rows); SQLite and the files decode and verify every read, from the page cache",
                    options.readBlocks, Double(options.readBlocks * 4096) / 1e6, readCacheBytes >> 20)
readsUncached.note = "the same reads with ContentStore's readCacheSize = 0: every get reads the entry (pread from the page cache), decompresses and re-hashes it, the work SQLite's and the files' reads do; SQLite and file-per-key as in the row above"
readsEqualMemory.note = String(format: "ContentStore with its %d MiB read cache (verified blobs, decoded; only a frame under 0.4 of its blob is kept compressed), SQLite with PRAGMA cache_size of the same %d MiB per connection (the one reading thread uses one pooled reader): the same memory for caching, each spent its own way (SQLite still decodes and verifies every read)",
                               readCacheBytes >> 20, readCacheBytes >> 20)
readsThriceCache.note = String(format: "%d blobs of 4 KiB (%.0f MB decoded, 3× ContentStore's %d MiB read cache decoded: about a third of them fit) read uniformly at random, one thread; each contender with its default cache, as in the first row",
                               thriceCacheBlocks, Double(thriceCacheBlocks * 4096) / 1e6, readCacheBytes >> 20)
readsThriceCacheCPU.note = "the reading thread's CPU time over the row's reads, divided by their count (the harness's clock reads included, the same for every contender): on a loaded machine the rate counts the time a read spends descheduled, this does not"
readsUncachedCPU.note = readsThriceCacheCPU.note
reclaimed.limitNote = "stored bytes of the blobs that only deleted files referenced"
reclaimedCompacted.limitNote = reclaimed.limitNote

let measurements = [ingest, ingestNoKDF, resticKDF, ingestCPU, ingestCPUWithIO, ingestSize, reingest, commits1, commits16,
                    reads, readsP50, readsP99, readsUncached, readsUncachedP99, readsUncachedCPU, readsEqualMemory, readsThriceCache, readsThriceCacheCPU,
                    collect, collectCompacted, reclaimed, reclaimedCompacted]
    + (warehouse?.measurements ?? []) + (archive?.measurements ?? []) + (versions?.measurements ?? [])
let measured = measurements.filter { !$0.rounds.isEmpty }
var advantages: [String: [String: Double]] = [:]
var advantageRounds: [String: [String: [Double?]]] = [:]
var fractions: [String: Double] = [:]
// The default collection returns no disk space (it only drops blobs from the index until packs are
// mostly dead), so its seconds are not comparable with peers that delete files or VACUUM: no ratio.
let notComparable: Set<String> = ["gc", "gc-reclaimed"]
for measurement in measured {
    for peer in Name.peers where !notComparable.contains(measurement.id) {
        if let advantage = measurement.advantage(over: peer) {
            advantages[measurement.id, default: [:]][peer] = advantage
            advantageRounds[measurement.id, default: [:]][peer] = measurement.advantageRounds(over: peer)
        }
    }
    if let fraction = measurement.fractionOfLimit { fractions[measurement.id] = fraction }
}

func verdict(_ target: String, _ required: String, _ value: Double?, _ threshold: Double, _ format: String) -> TargetVerdict {
    guard let value else { return TargetVerdict(target: target, required: required, measured: "not measured", met: nil) }
    return TargetVerdict(target: target, required: required, measured: String(format: format, value), met: value >= threshold)
}
/// A ratio target: met when the median of the per-round ratios reaches `threshold`; every round's
/// ratio is reported beside it, so a target met in some rounds only reads as such.
@MainActor func ratioVerdict(_ target: String, _ required: String, _ id: String, _ peer: String, _ threshold: Double?) -> TargetVerdict {
    guard let median = advantages[id]?[peer] else { return TargetVerdict(target: target, required: required, measured: "not measured", met: nil) }
    let perRound = advantageRounds[id]?[peer] ?? []
    return TargetVerdict(target: target, required: required, measured: String(format: "%.2f×", median),
                         met: threshold.map { median >= $0 }, roundRatios: perRound, threshold: threshold)
}
var targets: [TargetVerdict] = []
if engineWorkloads {
    targets += [
        ratioVerdict("bulk ingest vs restic", "≥ 5×", "ingest", Name.restic, 5),
        ratioVerdict("… the same with restic's key derivation (`restic cat config`) subtracted", "(reported)", "ingest-no-kdf", Name.restic, nil),
        {
            var limitVerdict = verdict("bulk ingest vs the machine limit", "≥ 80%", fractions["ingest"].map { $0 * 100 }, 80, "%.0f%%")
            limitVerdict.roundRatios = measured.first { $0.id == "ingest" }?.fractionRounds
            limitVerdict.threshold = 0.8
            limitVerdict.roundUnit = "%"
            return limitVerdict
        }(),
        ratioVerdict("durable commits, 16 writers, vs SQLite synchronous=FULL (issue 19: in every round)", "≥ 10×", "commits-16", Name.sqlite, 10),
        ratioVerdict("point reads vs SQLite, each with its default cache", "(reported)", "reads", Name.sqlite, nil),
        ratioVerdict("… read set 3× ContentStore's read cache (issue 19)", "≥ 5×", "reads-3x-cache", Name.sqlite, 5),
        ratioVerdict("… ContentStore's read cache off (every read decodes and verifies, as SQLite's does; issue 19)", "≥ 3×", "reads-uncached", Name.sqlite, 3),
        ratioVerdict("… equal memory budgets (SQLite's cache_size = readCacheSize)", "(reported)", "reads-equal-memory", Name.sqlite, nil),
    ]
}
if let fraction = fractions["commits-16"], let bound = commits16.limit {
    targets.append(TargetVerdict(target: "durable commits, 16 writers, vs the sync bound", required: "(reported)",
                                 measured: String(format: "%.0f%% of %.0f/s", fraction * 100, bound), met: nil))
}
if let p99 = readsP99.value(Name.contentStore), let sqliteP99 = readsP99.value(Name.sqlite) {
    targets.append(TargetVerdict(target: "point reads p99, ContentStore vs SQLite", required: "(reported)",
                                 measured: String(format: "%.1f µs vs %.1f µs", p99, sqliteP99), met: nil))
}
/// A lower-is-better target: met when the value is at most `bound`.
func atMost(_ target: String, _ required: String, _ value: Double?, _ bound: Double, _ format: String) -> TargetVerdict {
    TargetVerdict(target: target, required: required, measured: value.map { String(format: format, $0) } ?? "not measured", met: value.map { $0 <= bound })
}
if let warehouse {
    for threads in Set([1, warehouse.threads]).sorted() {
        for (id, operation) in [("add", "add-step"), ("undo", "undo")] {
            targets.append(ratioVerdict("Warehouse \(operation), \(threads) thread\(threads == 1 ? "" : "s"), vs directory-per-step", "≥ 10×",
                                        "wh-\(id)-\(threads)", Name.directoryPerStep, 10))
        }
    }
    if warehouse.duplicateMiB > 0 {
        targets.append(atMost("Warehouse duplicate of a project with \(warehouse.duplicateMiB) MiB of assets", "≤ 5 ms",
                              warehouse.duplicate.value(Name.contentStore), 5, "%.2f ms"))
    }
}
if let archive {
    for operation in ArchiveOperation.allCases {
        for api in ["async", "callback"] {
            // Issue 19 asks the callback get (a hop to another thread per call) for ≥ 1×.
            let threshold = operation == .get && api == "callback" ? 1.0 : 5.0
            targets.append(ratioVerdict("DataArchive \(operation.rawValue) 1 KiB (\(api) API) vs file-per-key", String(format: "≥ %g×", threshold),
                                        ArchiveWorkload.rowID(operation, "1 KiB", api), Name.filePerKey, threshold))
        }
    }
    // Issue 19: megabyte values at 0.8× the file scheme, compressible and not, through DataArchive and Store.
    for size in ["1 MiB", "1 MiB random"] {
        for operation in [ArchiveOperation.get, .set] {
            for api in [DataArchiveClient.API.async.rawValue, StoreValueClient.api] {
                let through = api == StoreValueClient.api ? "Store" : "DataArchive (async API)"
                targets.append(ratioVerdict("\(through) \(operation.rawValue) \(size) vs file-per-key", "≥ 0.8×",
                                            ArchiveWorkload.rowID(operation, size, api), Name.filePerKey, 0.8))
            }
        }
    }
    targets.append(atMost("DataArchive: \(options.archiveVersions) versions with 10 distinct contents, on disk", "≈ 10 versions' bytes (≤ 11)",
                          archive.storage.last?.value(Name.contentStore), 11, "%.1f versions' bytes"))
}
if let versions {
    let ratio = versions.storedRatio
    targets.append(TargetVerdict(target: "\(versions.count) versions, one 4 KiB edit apart: stored / one version compressed, right after the last commit",
                                 required: "(reported)", measured: ratio.value(Name.contentStore).map { String(format: "%.2f×", $0) } ?? "—", met: nil))
    targets.append(atMost("… the same after a checkpoint (the log's copies of carried pack bytes dropped)", "≤ 1.5×",
                          versions.storedRatioAtRest.value(Name.contentStore), 1.5, "%.2f×"))
    let peers = [Name.restic, Name.borg].compactMap { peer in ratio.value(peer).map { String(format: "%@ %.2f×", peer, $0) } }
    if !peers.isEmpty {
        targets.append(TargetVerdict(target: "… the same for restic and borg", required: "(reported)", measured: peers.joined(separator: ", "), met: nil))
    }
}
let elapsed = Double(monotonicNanoseconds() - started) / 1e9
targets.append(TargetVerdict(target: "the comparison run itself (build excluded)", required: "≤ 600 s",
                             measured: String(format: "%.0f s", elapsed), met: elapsed <= 600))

let report = Report(
    run: RunInfo.current(options: options, corpus: corpus, elapsed: elapsed, tools: tools, skipped: skipped),
    limits: limitRounds, measurements: measured, advantages: advantages, advantageRounds: advantageRounds, fractionsOfLimit: fractions,
    contentStoreStatistics: contentStoreStatistics, contentStoreIngestBreakdown: ingestBreakdown, targets: targets)
try ReportWriter(report: report).write(to: options.output)
Progress.log("done in \(Int(elapsed)) s; wrote \(options.output)/latest.md, latest.json, latest.svg")
print(try String(contentsOfFile: options.output + "/latest.md", encoding: .utf8))
