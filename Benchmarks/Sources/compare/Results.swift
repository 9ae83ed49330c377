import Foundation

/// Contender names, in table order.
enum Name {
    static let contentStore = "ContentStore"
    static let sqlite = "SQLite (GRDB)"
    static let filePerKey = "file-per-key"
    static let restic = "restic"
    static let git = "git"
    static let borg = "borg"
    /// The original Warehouse's layout (``DirectoryProjectStore``).
    static let directoryPerStep = "directory-per-step"
    static let columns = [contentStore, sqlite, filePerKey, directoryPerStep, restic, borg, git]
    static let peers = [sqlite, filePerKey, directoryPerStep, restic, borg, git]
}

/// One figure measured for several contenders, once per round.
struct Measurement: Codable {
    var id: String
    var workload: String
    var unit: String
    var higherIsBetter: Bool
    /// Per contender, the value of each round (index = round; nil where it did not run).
    var rounds: [String: [Double?]] = [:]
    /// What the machine allows for ContentStore's figure in each round, when there is such a bound.
    var limitRounds: [Double?] = []
    var limitNote: String?
    var note: String?
    /// The report's section (one results table each).
    var group: String

    static let engineGroup = "Store engine (issue 7)"

    init(id: String, workload: String, unit: String, higherIsBetter: Bool, note: String? = nil, group: String = Measurement.engineGroup) {
        self.id = id
        self.workload = workload
        self.unit = unit
        self.higherIsBetter = higherIsBetter
        self.note = note
        self.group = group
    }

    /// The median limit over rounds.
    var limit: Double? { Self.median(limitRounds.compactMap { $0 }) }

    mutating func recordLimit(round: Int, _ value: Double) {
        while limitRounds.count <= round { limitRounds.append(nil) }
        limitRounds[round] = value
    }

    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    mutating func record(_ contender: String, round: Int, _ value: Double) {
        var values = rounds[contender] ?? []
        while values.count <= round { values.append(nil) }
        values[round] = value
        rounds[contender] = values
    }

    /// The median over rounds.
    func value(_ contender: String) -> Double? {
        Self.median((rounds[contender] ?? []).compactMap { $0 })
    }

    /// How many times better ContentStore is than `peer` (> 1: ContentStore better), as the median of
    /// the ratios within each round, so both sides of each ratio ran under the same machine load.
    func advantage(over peer: String) -> Double? {
        Self.median(advantageRounds(over: peer).compactMap { $0 })
    }

    /// The ratio of each round (nil where either side did not run): what the median hides when a
    /// target is met in some rounds only.
    func advantageRounds(over peer: String) -> [Double?] {
        guard let mine = rounds[Name.contentStore], let theirs = rounds[peer] else { return [] }
        return zip(mine, theirs).map { a, b in
            guard let a, let b, a > 0, b > 0 else { return nil }
            return higherIsBetter ? a / b : b / a
        }
    }

    /// ContentStore's figure as a fraction of the machine's limit measured in the same round (for
    /// lower-is-better figures, limit / value); the median over rounds.
    var fractionOfLimit: Double? {
        Self.median(fractionRounds.compactMap { $0 })
    }

    /// The fraction of each round (nil where the figure or its limit is missing).
    var fractionRounds: [Double?] {
        guard let mine = rounds[Name.contentStore] else { return [] }
        return zip(mine, limitRounds).map { value, limit in
            guard let value, let limit, value > 0, limit > 0 else { return nil }
            return higherIsBetter ? value / limit : limit / value
        }
    }
}

/// A target from issue 7 and whether this run met it.
struct TargetVerdict: Codable {
    var target: String
    var required: String
    var measured: String
    var met: Bool?
    /// For a ratio target: the ratio of each round (nil where one side did not run), and the bound.
    var roundRatios: [Double?]? = nil
    var threshold: Double? = nil
    /// How a round's ratio prints: "×" (a ratio) or "%" (a fraction of a limit).
    var roundUnit = "×"

    /// Rounds whose own ratio reached the threshold, of the rounds measured.
    var roundsMet: (met: Int, of: Int)? {
        guard let roundRatios, let threshold else { return nil }
        let measured = roundRatios.compactMap { $0 }
        return (measured.filter { $0 >= threshold }.count, measured.count)
    }
}

struct RunInfo: Codable {
    var date: String
    var host: String
    var cpu: String
    var cores: Int
    var memoryGiB: Double
    var kernel: String
    var scratchDirectory: String
    var corpusBytes: Int
    var corpusUniqueBytes: Int
    var corpusFiles: Int
    var corpusShares: [String: Int]
    var rounds: Int
    var commitSeconds: Double
    var readSeconds: Double
    var readBlocks: Int
    var elapsedSeconds: Double
    var tools: [String: String]
    var skipped: [String: String]
    /// The ContentStore commit measured (the repository's HEAD).
    var engineCommit: String
    /// Sizes of the facade and versions workloads (`Options`).
    var parameters: [String: Double]
}

struct Report: Codable {
    var run: RunInfo
    /// The probes of each round.
    var limits: [MachineLimits]
    var measurements: [Measurement]
    var advantages: [String: [String: Double]]
    /// The same ratios round by round (measurement id → peer → one per round, nil where one side did not run).
    var advantageRounds: [String: [String: [Double?]]]
    var fractionsOfLimit: [String: Double]
    var contentStoreStatistics: [String: Double]
    /// Per round: wall and CPU seconds of ContentStore's ingest, and thread-seconds spent in put and in commit.
    var contentStoreIngestBreakdown: [[String: Double]]
    var targets: [TargetVerdict]
}
