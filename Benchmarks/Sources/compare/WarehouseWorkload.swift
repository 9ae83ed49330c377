import BenchSupport
import Foundation
import Synchronization
import Warehouse

/// Issue 4's workload: add-step (4 KiB step user data + a 256 KiB asset), undo, redo and fetch
/// snapshot, on one project from one thread and on `threads` projects from as many threads; and
/// duplicating a project holding `duplicateMiB` MiB of assets. ContentStore's `ProjectStorage`
/// against the original's directory-per-step layout (``DirectoryProjectStore``), both durable.
struct WarehouseWorkload {
    enum Operation: String, CaseIterable {
        case addStep = "add-step (4 KiB user data + 256 KiB asset)"
        case undo, redo
        case fetch = "fetch snapshot (step IDs + user data)"
    }

    let seconds: Double
    let threads: Int
    let duplicateMiB: Int
    let duplicates: Int
    private let contenders: [any ProjectStoreContender]
    /// Per contender, the project holding `duplicateMiB` of assets.
    private var duplicateSources: [String: UUID] = [:]
    private var rates: [Int: [Operation: Measurement]] = [:]
    /// CPU milliseconds (user + system, whole process) per add-step: ContentStore compresses and
    /// hashes every asset, the directory layout only copies it, so on a busy machine the CPU share decides.
    private var addStepCPU: [Int: Measurement] = [:]
    private(set) var duplicate = Measurement(id: "wh-duplicate", workload: "duplicate a project", unit: "ms", higherIsBetter: false)
    private let stepUserData: Data
    private let asset: Data
    private let projectUserData: Data

    static let group = "Warehouse (issue 4)"

    init(options: Options) throws {
        seconds = options.warehouseSeconds
        threads = options.warehouseThreads
        duplicateMiB = options.duplicateMiB
        duplicates = options.duplicates
        var generator = ContentGenerator(seed: 4)
        stepUserData = Data(generator.textBlock(size: 4 << 10))
        asset = Data(generator.textBlock(size: 256 << 10))
        projectUserData = Data(generator.textBlock(size: 4 << 10))
        var contenders: [any ProjectStoreContender] = []
        if options.includes(contender: Name.contentStore) {
            contenders.append(try WarehouseContender(directory: try POSIX.scratchDirectory("compare/warehouse-contentstore")))
        }
        if options.includes(contender: Name.directoryPerStep) {
            contenders.append(try DirectoryProjectStore(directory: try POSIX.scratchDirectory("compare/warehouse-directories")))
        }
        self.contenders = contenders
        for threadCount in [1, threads] {
            var byOperation: [Operation: Measurement] = [:]
            for operation in Operation.allCases {
                let label = threadCount == 1 ? "1 thread" : "\(threadCount) threads on \(threadCount) projects"
                byOperation[operation] = Measurement(id: "wh-\(operation.idPart)-\(threadCount)", workload: "Warehouse \(operation.rawValue), \(label)",
                                                     unit: "ops/s", higherIsBetter: true, group: Self.group)
            }
            rates[threadCount] = byOperation
            addStepCPU[threadCount] = Measurement(id: "wh-add-cpu-\(threadCount)", workload: "… CPU time per add-step, \(threadCount) thread\(threadCount == 1 ? "" : "s")",
                                                  unit: "CPU ms", higherIsBetter: false, group: Self.group)
        }
        duplicate.workload = "Warehouse duplicate of a project with \(duplicateMiB) MiB of assets"
        duplicate.group = Self.group
        duplicate.note = "ContentStore references the assets' blobs (O(1) in their size); the directory layout copies the project's tree with copy_file_range (which shares extents on file systems with reflinks, e.g. XFS and Btrfs; it copies on ext4) and fsyncs it"
        try prepareDuplicateSources()
    }

    /// Fills one project per contender with `duplicateMiB` assets of 1 MiB (not timed).
    private mutating func prepareDuplicateSources() throws {
        guard duplicateMiB > 0 else { return }
        var projects: [String: UUID] = [:]
        for contender in contenders { projects[contender.name] = try contender.createProject(userData: projectUserData) }
        var generator = ContentGenerator(seed: 9)
        for index in 0 ..< duplicateMiB {
            let data = Data(generator.textBlock(size: 1 << 20))
            for contender in contenders { try contender.setAsset(data, named: "asset-\(index).bin", in: projects[contender.name]!) }
        }
        duplicateSources = projects
        sync()
        Progress.log("warehouse: a project with \(duplicateMiB) MiB of assets in each of \(contenders.map(\.name).joined(separator: ", "))")
    }

    var measurements: [Measurement] {
        [1, threads].flatMap { count in Operation.allCases.map { rates[count]![$0]! } + [addStepCPU[count]!] } + (duplicateMiB > 0 ? [duplicate] : [])
    }

    mutating func run(round: Int, label: String) throws {
        for contender in rotated(contenders, by: round) {
            for threadCount in [1, threads] {
                let (result, cpu) = try phases(contender, threads: threadCount)
                for (operation, rate) in result { rates[threadCount]![operation]!.record(contender.name, round: round, rate) }
                addStepCPU[threadCount]!.record(contender.name, round: round, cpu * 1000)
                sync()
                Progress.log(String(format: "%@: %@ Warehouse, %d thread%@: add-step %.0f/s (%.2f CPU ms each), undo %.0f/s, redo %.0f/s, fetch %.0f/s",
                                    label, contender.name, threadCount, threadCount == 1 ? "" : "s", result[.addStep] ?? 0, cpu * 1000,
                                    result[.undo] ?? 0, result[.redo] ?? 0, result[.fetch] ?? 0))
            }
            if let source = duplicateSources[contender.name] {
                var times: [Double] = []
                var copies: [UUID] = []
                for _ in 0 ..< duplicates {
                    var copy: UUID?
                    times.append(try measureSeconds { copy = try contender.duplicate(source) } * 1000)
                    copies.append(copy!)
                }
                for copy in copies { try contender.deleteProject(copy) }
                sync()
                duplicate.record(contender.name, round: round, median(times))
                Progress.log(String(format: "%@: %@ Warehouse duplicate (%d MiB of assets): %.2f ms (median of %d)",
                                    label, contender.name, duplicateMiB, median(times), duplicates))
            }
        }
    }

    /// Add-step for `seconds`, then undo as many (or for `seconds`), redo as many, fetch for
    /// `seconds / 2`, each of `threads` threads on a fresh project of its own. Ops/s of each phase,
    /// and the process's CPU seconds per add-step.
    private func phases(_ contender: any ProjectStoreContender, threads: Int) throws -> (rates: [Operation: Double], addStepCPU: Double) {
        let projects = try (0 ..< threads).map { _ in try contender.createProject(userData: projectUserData) }
        let counts = CountsByThread(threads)
        let (stepUserData, asset) = (self.stepUserData, self.asset)
        var result: [Operation: Double] = [:]
        func phase(_ operation: Operation, seconds: Double, limit: @escaping @Sendable (Int) -> Int,
                   _ body: @escaping @Sendable (UUID, inout Data) throws -> Void) throws {
            let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
            let elapsed = try measureSeconds {
                try runThreads(threads) { thread in
                    var scratch = asset
                    var done = 0
                    while done < limit(thread) && monotonicNanoseconds() < deadline {
                        try body(projects[thread], &scratch)
                        done += 1
                    }
                    counts[thread] = done
                }
            }
            result[operation] = Double(counts.total) / elapsed
        }
        // Every step's asset is new bytes (a real edit), so nothing dedups away.
        let tags = WorkQueue(count: .max), nonce = monotonicNanoseconds()
        let addStep: @Sendable (UUID, inout Data) throws -> Void = { project, scratch in
            let value = nonce &+ UInt64(tags.next()!) &* 0x9E37_79B9_7F4A_7C15
            scratch.withUnsafeMutableBytes { $0.storeBytes(of: value, as: UInt64.self) }
            try contender.addStep(to: project, content: StepContent(userData: stepUserData, assets: ["layer.bin": scratch]))
        }
        // Warm-up, not timed: a few steps each (the first writes after a pause run slower).
        try phase(.addStep, seconds: seconds / 4, limit: { _ in 5 }, addStep)
        let cpuBefore = cpuSeconds()
        try phase(.addStep, seconds: seconds, limit: { _ in 5000 }, addStep)
        let addStepCPU = (cpuSeconds() - cpuBefore) / Double(max(1, counts.total))
        let added = counts.snapshot
        try phase(.undo, seconds: seconds, limit: { added[$0] }) { project, _ in try contender.undo(project) }
        let undone = counts.snapshot
        try phase(.redo, seconds: seconds, limit: { undone[$0] }) { project, _ in try contender.redo(project) }
        try phase(.fetch, seconds: seconds / 2, limit: { _ in Int.max }) { project, _ in _ = try contender.fetchSnapshot(project) }
        for project in projects { try contender.deleteProject(project) }
        return (result, addStepCPU)
    }

    func close() throws {
        for contender in contenders { try contender.close() }
    }
}

extension WarehouseWorkload.Operation {
    var idPart: String {
        switch self {
        case .addStep: "add"
        case .undo: "undo"
        case .redo: "redo"
        case .fetch: "fetch"
        }
    }
}

/// Per-thread operation counts, each slot written by its thread and read after they are joined.
final class CountsByThread: Sendable {
    private let slots: Mutex<[Int]>
    init(_ count: Int) { slots = Mutex([Int](repeating: 0, count: count)) }
    subscript(thread: Int) -> Int {
        get { slots.withLock { $0[thread] } }
        set { slots.withLock { $0[thread] = newValue } }
    }
    var snapshot: [Int] { slots.withLock { $0 } }
    var total: Int { snapshot.reduce(0, +) }
}
