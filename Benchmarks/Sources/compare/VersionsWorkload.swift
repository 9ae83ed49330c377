import BenchSupport
import ContentStore
import Foundation

/// Issue 8's workload: `versions` versions of a `versionMiB` MiB file of mixed content, each
/// differing from the one before by one 4 KiB edit at a random offset (the same seeded sequence for
/// every contender), each stored as it appears: ContentStore `put(contentsOf:)` plus a durable record
/// per version; `restic backup` and `borg create` of the file per version. Stored bytes (also as a
/// multiple of one version's zstd -3 size) and MB/s of version bytes.
struct VersionsWorkload {
    static let group = "Versions of a large file (issue 8)"
    static let editBytes = 4096

    let count: Int
    let fileBytes: Int
    let rounds: Int
    private let tools: [ExternalTool]
    private let includesContentStore: Bool
    private let original: [UInt8]
    /// zstd -3 of one version, in one frame.
    let oneVersionCompressed: Int
    private(set) var stored: Measurement
    private(set) var storedRatio: Measurement
    /// The same once a checkpoint has run (ContentStore; the others keep no log).
    private(set) var storedRatioAtRest: Measurement
    private(set) var speed: Measurement
    /// What each version after the first added on disk: the cost of one 4 KiB edit.
    private(set) var perEdit: Measurement

    init(options: Options, tools: [ExternalTool]) {
        count = options.versions
        fileBytes = options.versionMiB << 20
        rounds = options.versionRounds
        self.tools = tools
        includesContentStore = options.includes(contender: Name.contentStore)
        original = Self.mixedContent(size: fileBytes)
        oneVersionCompressed = original.withUnsafeBytes { ZstdCodec.compress($0)?.count ?? $0.count }
        let what = "\(count) versions of a \(options.versionMiB) MiB file, one 4 KiB edit apart"
        stored = Measurement(id: "versions-stored", workload: "\(what): stored bytes", unit: "MB", higherIsBetter: false, group: Self.group)
        storedRatio = Measurement(id: "versions-ratio", workload: "… stored / one version's zstd -3 size", unit: "×", higherIsBetter: false, group: Self.group)
        storedRatioAtRest = Measurement(id: "versions-ratio-at-rest", workload: "… the same after a checkpoint", unit: "×", higherIsBetter: false,
                                        note: "a checkpoint (which the store runs by itself once its log passes checkpointThreshold, or in periodic maintenance) drops the log's copies of the pack bytes each version's commit carried; restic and borg keep no log: their figure is the one above",
                                        group: Self.group)
        speed = Measurement(id: "versions-speed", workload: "… storing the versions", unit: "MB/s", higherIsBetter: true,
                            note: "version bytes (\(count) × \(options.versionMiB) MiB) per second, each version stored durably as it is made; restic and borg pay a process start and a repository open per version, as a backup per version does", group: Self.group)
        perEdit = Measurement(id: "versions-per-edit", workload: "… bytes each later version added", unit: "KB", higherIsBetter: false, group: Self.group)
        perEdit.recordLimit(round: 0, Double(Self.editBytes) / 1e3)
        perEdit.limitNote = "the 4 KiB edit itself, stored raw"
        stored.recordLimit(round: 0, Double(oneVersionCompressed) / 1e6)
        storedRatio.recordLimit(round: 0, 1)
        storedRatioAtRest.recordLimit(round: 0, 1)
        stored.limitNote = "one version's zstd -3 size (\(String(format: "%.1f", Double(oneVersionCompressed) / 1e6)) MB): what the first version costs; every later one adds about an edit"
        storedRatio.limitNote = "1: only the first version's bytes (issue 8's target is ≤ 1.5)"
    }

    var measurements: [Measurement] { [stored, storedRatio, storedRatioAtRest, perEdit, speed] }

    /// Mixed content: runs of English-like text, source-like code and random bytes (64 KiB to
    /// 1 MiB each), in the corpus's proportions.
    static func mixedContent(size: Int) -> [UInt8] {
        var generator = ContentGenerator(seed: 16)
        var random = DeterministicRandom(seed: 17)
        var content: [UInt8] = []
        content.reserveCapacity(size)
        while content.count < size {
            let kinds: [Corpus.Kind] = [.text, .text, .text, .source, .source, .binary, .binary]
            var run: [UInt8] = []
            generator.generate(kinds[random.below(kinds.count)], size: min(size - content.count, random.logUniform((64 << 10) ... (1 << 20))), into: &run)
            content.append(contentsOf: run)
        }
        return content
    }

    mutating func run(round: Int, label: String) throws {
        guard round < rounds else { return }
        var entrants: [ExternalTool?] = tools.map { $0 }
        if includesContentStore { entrants.insert(nil, at: 0) }
        for tool in rotated(entrants, by: round) {
            let name = tool?.name ?? Name.contentStore
            let directory = try POSIX.scratchDirectory("compare/versions")
            let file = directory + "/work/document.bin"
            try POSIX.makeDirectory(directory + "/work")
            try original.withUnsafeBytes { try POSIX.writeFile(file, $0, sync: false) }
            var edits = DeterministicRandom(seed: 8)
            var generator = ContentGenerator(seed: 88)
            var store: Store?
            var configuration = Store.Configuration()
            configuration.logger.logLevel = .warning
            let repository = URL(fileURLWithPath: directory + "/repo")
            if let tool {
                try tool.initRepository(in: directory)
            } else {
                store = try Store(at: repository, configuration: configuration)
            }
            var seconds = 0.0
            var firstVersionBytes = 0.0
            for version in 0 ..< count {
                if version > 0 {
                    let offset = edits.below(fileBytes - Self.editBytes + 1)
                    try Self.overwrite(file, at: offset, with: generator.textBlock(size: Self.editBytes))
                }
                if let tool {
                    seconds += try tool.backup(file: file, version: version, repository: directory)
                } else if let store {
                    seconds += try measureSeconds {
                        let digest = try store.put(contentsOf: URL(fileURLWithPath: file))
                        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "version/\(version)") }
                    }
                }
                if version == 0 {
                    // Measured closed, as at the end: an open store's log has zeros written ahead of it.
                    try store?.close()
                    firstVersionBytes = Double(tool?.repositorySize(directory) ?? POSIX.diskUsage(directory + "/repo"))
                    if store != nil { store = try Store(at: repository, configuration: configuration) }
                }
            }
            var detail = ""
            if let store {
                let statistics = try store.statistics()
                detail = String(format: " (statistics: %.1f MB stored in %d blobs)", Double(statistics.storedBytes) / 1e6, statistics.blobCount)
                try store.close()
            }
            let bytes = Double(tool?.repositorySize(directory) ?? POSIX.diskUsage(directory + "/repo"))
            var bytesAtRest = bytes
            if store != nil {
                let reopened = try Store(at: repository, configuration: configuration)
                try reopened.checkpoint()
                try reopened.close()
                bytesAtRest = Double(POSIX.diskUsage(directory + "/repo"))
            }
            stored.record(name, round: round, bytes / 1e6)
            storedRatio.record(name, round: round, bytes / Double(oneVersionCompressed))
            storedRatioAtRest.record(name, round: round, bytesAtRest / Double(oneVersionCompressed))
            speed.record(name, round: round, Double(count * fileBytes) / 1e6 / seconds)
            if count > 1 { perEdit.record(name, round: round, (bytes - firstVersionBytes) / Double(count - 1) / 1e3) }
            Progress.log(String(format: "%@: %@ versions: %.1f MB on disk = %.2f× one version compressed (%.2f× after a checkpoint)%@, %.1f MB/s",
                                label, name, bytes / 1e6, bytes / Double(oneVersionCompressed), bytesAtRest / Double(oneVersionCompressed), detail,
                                Double(count * fileBytes) / 1e6 / seconds))
            POSIX.removeTree(directory)
            sync()
        }
    }

    private static func overwrite(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
        let fd = try POSIX.open(path, O_WRONLY)
        defer { close(fd) }
        try bytes.withUnsafeBytes { buffer in
            guard pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset)) == buffer.count else {
                throw SystemCallError(call: "pwrite", path: path, code: errno)
            }
        }
    }
}
