import BenchSupport
import Foundation

// Invariant: every round's value and every round's ratio is printed — a target met in the median
// but missed in some rounds reads as such.

struct ClusterReport {
    var options: Options
    var rows: [Row] = []
    var loads: [(String, String)] = []
    var notes: [String] = []
    var corpus: String?
    var skipped: String?
    var failure: String?
    var elapsed = 0.0

    static let begin = "<!-- cluster-compare:begin -->"
    static let end = "<!-- cluster-compare:end -->"

    struct Target {
        var name: String
        var required: String
        var row: String
        var numerator: String
        var denominator: String
        var threshold: Double?
    }

    var targets: [Target] {
        let largest = options.memoryBlobs.max() ?? 0, smallest = options.memoryBlobs.min() ?? 0
        return [
            Target(name: "durable commits, \(options.processes * options.writers) writers in \(options.processes) processes, vs one PostgreSQL transaction per commit",
                   required: "≥ 3×", row: "cluster-commits", numerator: Contender.cluster, denominator: Contender.postgres, threshold: 3),
            Target(name: "bulk ingest vs `restic backup` to the same S3 server", required: "≥ 3×", row: "cluster-ingest",
                   numerator: Contender.cluster, denominator: Contender.restic, threshold: 3),
            Target(name: "4 KiB point reads, cold, vs `SELECT`", required: "(reported)", row: "cluster-reads-cold",
                   numerator: Contender.cluster, denominator: Contender.postgres, threshold: nil),
            Target(name: "4 KiB point reads, warm, vs `SELECT`", required: "(reported)", row: "cluster-reads-warm",
                   numerator: Contender.cluster, denominator: Contender.postgres, threshold: nil),
            Target(name: "instance RSS, \(largest) vs \(smallest) blobs (does not grow with the cluster)", required: "≤ 1.25×", row: "cluster-memory",
                   numerator: "\(largest) blobs", denominator: "\(smallest) blobs", threshold: nil),
        ]
    }

    func ratios(_ target: Target) -> [Double] {
        guard let row = rows.first(where: { $0.id == target.row }),
              let top = row.rounds[target.numerator], let bottom = row.rounds[target.denominator] else { return [] }
        return zip(top, bottom).map { $0 / $1 }
    }

    func markdown() -> String {
        var lines = ["## Cluster (issue 17): ContentStoreCluster beside plain PostgreSQL and restic", ""]
        lines.append("`make compare-cluster` (or the end of `make compare`); \(ISO8601DateFormatter().string(from: Date())); "
                     + "\(options.rounds) rounds; \(String(format: "%.0f", elapsed)) s. PostgreSQL and SeaweedFS's S3 gateway from "
                     + "`Scripts/cluster-services.sh` on this machine (127.0.0.1, fsync on). Load averages (1, 5, 15 min): "
                     + loads.map { "\($0.0) \($0.1)" }.joined(separator: "; ") + " — on 2 cores shared with other builds, absolute "
                     + "numbers are pessimistic; the ratios of the same rounds are what count.")
        lines.append("")
        if let skipped { return (lines + ["**Skipped**: \(skipped)", ""]).joined(separator: "\n") }
        if let failure { lines += ["**The run failed**: \(failure.prefix(1500))", ""] }
        lines += notes.map { "- \($0)" }
        if !notes.isEmpty { lines.append("") }
        lines += [
            "What each contender does per operation:",
            "- **durable commits**: \(options.processes) processes × \(options.writers) writers for \(String(format: "%g", options.commitSeconds)) s, each writer committing a 100-byte value under one of its own 1,024 keys. ContentStoreCluster: `store.write { setRecord }` on `Store(cluster:)` (one instance per process; group commit: one transaction per batch of the instance's queued writes — READ COMMITTED with the rows locked, as these blind writes allow, SERIALIZABLE for bodies that read other keys — `synchronous_commit` on). PostgreSQL: per writer its own postgres-nio connection, each commit one autocommit `INSERT … ON CONFLICT (key) DO UPDATE` (one transaction, one round trip, `synchronous_commit = on`) into a `(key text PRIMARY KEY, value bytea)` table.",
            "- **bulk ingest** of the compare corpus\(corpus.map { " (\($0))" } ?? ""): ContentStoreCluster with \(options.ingestThreads) threads, `put(contentsOf:)` per file and one `write` per 64 files (a record per file), as `compare`'s ContentStore contender; restic: `restic -r s3:<endpoint>/<bucket> backup .` (repository `init` not timed; its key derivation, the row below, included).",
            "- **4 KiB point reads**: \(options.readBlocks) text blocks of 4 KiB written by one instance; a second instance opened fresh each round reads each once in random order (cold: every read misses its cache; the blobs are inline in PostgreSQL, `blobs.inline_data`, zstd, verified), then uniformly at random for \(String(format: "%g", options.readSeconds)) s (warm: its memory cache). PostgreSQL: one connection, `SELECT data FROM bench_blobs WHERE digest = $1` of the same raw bytes (its shared buffers hold the table in both passes).",
            "- **memory**: clusters of \(options.memoryBlobs.map(String.init).joined(separator: " and ")) distinct 256-byte blobs, each referenced by its own record; a fresh instance in its own process lists every key (100 prefix listings) and gets 2,000 blobs; its RSS and peak RSS.",
            "",
            "| target | required | median | every round | met |",
            "|---|---|---|---|---|",
        ]
        for target in targets {
            let perRound = ratios(target)
            guard !perRound.isEmpty else { continue }
            let middle = median(perRound)
            var required = target.required, met = "—"
            if target.row == "cluster-memory" {
                met = middle <= 1.25 ? "yes" : "**no**"
            } else if let threshold = target.threshold {
                met = perRound.allSatisfy({ $0 >= threshold }) ? "yes" : middle >= threshold ? "median only" : "**no**"
            } else { required = "(reported)" }
            lines.append("| \(target.name) | \(required) | \(String(format: "%.2f×", middle)) | "
                         + perRound.map { String(format: "%.2f×", $0) }.joined(separator: ", ") + " | \(met) |")
        }
        lines.append("")
        lines += ["| workload | unit | contender | every round | median |", "|---|---|---|---|---|"]
        for row in rows {
            for (contender, values) in row.rounds.sorted(by: { $0.key < $1.key }) {
                lines.append("| \(row.workload) | \(row.unit) | \(contender) | "
                             + values.map { Self.format($0) }.joined(separator: ", ") + " | \(Self.format(median(values))) |")
            }
        }
        lines.append("")
        return lines.joined(separator: "\n")
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)
    }

    /// cluster.md, cluster.json, and the section between the markers of latest.md (appended when absent).
    func write(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let section = markdown()
        try section.write(toFile: directory + "/cluster.md", atomically: true, encoding: .utf8)
        struct JSONReport: Codable {
            var rows: [Row]; var ratios: [String: [Double]]; var loads: [String: String]; var skipped: String?; var failure: String?; var seconds: Double
        }
        let json = JSONReport(rows: rows, ratios: Dictionary(uniqueKeysWithValues: targets.map { ($0.row, ratios($0)) }),
                              loads: Dictionary(loads, uniquingKeysWith: { $1 }), skipped: skipped, failure: failure, seconds: elapsed)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(json).write(to: URL(fileURLWithPath: directory + "/cluster.json"))
        let latest = directory + "/latest.md"
        var text = (try? String(contentsOfFile: latest, encoding: .utf8)) ?? ""
        let block = "\(Self.begin)\n\(section)\n\(Self.end)\n"
        if let start = text.range(of: Self.begin), let stop = text.range(of: Self.end, range: start.upperBound ..< text.endIndex) {
            let through = text[stop.upperBound...].hasPrefix("\n") ? text.index(after: stop.upperBound) : stop.upperBound
            text.replaceSubrange(start.lowerBound ..< through, with: block)
        } else {
            text += (text.isEmpty || text.hasSuffix("\n\n") ? "" : "\n") + block
        }
        try text.write(toFile: latest, atomically: true, encoding: .utf8)
    }
}
