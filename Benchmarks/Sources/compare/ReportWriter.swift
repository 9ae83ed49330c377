import BenchSupport
import Foundation

extension RunInfo {
    static func current(options: Options, corpus: Corpus, elapsed: Double, tools: [String: String], skipped: [String: String]) -> RunInfo {
        func firstLine(_ path: String, prefix: String) -> String {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "" }
            return text.split(separator: "\n").first { $0.hasPrefix(prefix) }
                .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? ""
        }
        var uts = utsname()
        uname(&uts)
        let release = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let formatter = ISO8601DateFormatter()
        return RunInfo(
            date: formatter.string(from: Date()),
            host: ProcessInfo.processInfo.hostName,
            cpu: firstLine("/proc/cpuinfo", prefix: "model name"),
            cores: ProcessInfo.processInfo.activeProcessorCount,
            memoryGiB: Double(ProcessInfo.processInfo.physicalMemory) / Double(1 << 30),
            kernel: "Linux " + release,
            scratchDirectory: POSIX.scratchRoot,
            corpusBytes: corpus.totalBytes, corpusUniqueBytes: corpus.uniqueBytes, corpusFiles: corpus.files.count,
            corpusShares: Dictionary(uniqueKeysWithValues: Corpus.Kind.allCases.map { ($0.rawValue, corpus.bytes(of: $0)) }),
            rounds: options.rounds, commitSeconds: options.commitSeconds, readSeconds: options.readSeconds,
            readBlocks: options.readBlocks, elapsedSeconds: elapsed, tools: tools, skipped: skipped,
            engineCommit: measuredEngineCommit(),
            parameters: ["warehouseSeconds": options.warehouseSeconds, "warehouseThreads": Double(options.warehouseThreads),
                         "duplicateMiB": Double(options.duplicateMiB), "duplicates": Double(options.duplicates),
                         "archiveSeconds": options.archiveSeconds, "archiveVersions": Double(options.archiveVersions),
                         "versions": Double(options.versions), "versionMiB": Double(options.versionMiB),
                         "versionRounds": Double(options.versionRounds), "facadeRounds": Double(options.facadeRounds)])
    }
}

/// The engine commit measured: the last commit of the repository this harness sits in that
/// changed the engine (`Sources/`, `Package.swift`), "+ uncommitted changes" when they differ from it.
private func measuredEngineCommit() -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    guard let path = ExternalTool.find("git") else { return "unknown (no git)" }
    let git = ExternalTool(name: Name.git, executable: path)
    guard let head = try? git.run(["-C", root, "log", "-1", "--format=%h", "--abbrev=12", "--", "Sources", "Package.swift"], environment: [:]) else {
        return "unknown"
    }
    let changes = (try? git.run(["-C", root, "status", "--porcelain", "--", "Sources", "Package.swift"], environment: [:])) ?? ""
    return head.trimmingCharacters(in: .whitespacesAndNewlines) + (changes.isEmpty ? "" : " + uncommitted changes")
}

extension [MachineLimits] {
    /// Field by field, the median over rounds.
    var medianLimits: MachineLimits {
        func m(_ key: (MachineLimits) -> Double) -> Double { Measurement.median(map(key)) ?? 0 }
        return MachineLimits(
            sha256MBpsPerCore: m(\.sha256MBpsPerCore), zstdMBpsPerCore: m(\.zstdMBpsPerCore),
            zstdStoredBytes: Int(m { Double($0.zstdStoredBytes) }), ingestCPUSeconds: m(\.ingestCPUSeconds),
            readCPUSeconds: m(\.readCPUSeconds), storeWriteCPUSeconds: m(\.storeWriteCPUSeconds),
            ingestComputeSeconds: m(\.ingestComputeSeconds), reingestComputeSeconds: m(\.reingestComputeSeconds),
            writeMBps: m(\.writeMBps), appendSyncMedianMs: m(\.appendSyncMedianMs), appendSyncP99Ms: m(\.appendSyncP99Ms),
            overwriteSyncMedianMs: m(\.overwriteSyncMedianMs), pointReadOpsPerSecond: m(\.pointReadOpsPerSecond),
            cores: first?.cores ?? 0)
    }
}

/// Writes latest.md, latest.json and latest.svg.
struct ReportWriter {
    let report: Report

    func write(to directory: String) throws {
        try POSIX.makeDirectory(directory)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(report).write(to: URL(fileURLWithPath: directory + "/latest.json"))
        try markdown().write(toFile: directory + "/latest.md", atomically: true, encoding: .utf8)
        try svg().write(toFile: directory + "/latest.svg", atomically: true, encoding: .utf8)
    }

    // MARK: Markdown

    static func format(_ value: Double?, unit: String) -> String {
        guard var value else { return "—" }
        if abs(value) < 0.05 { value = 0 }  // no "-0.0" for a store that grew by a few KB
        switch unit {
        case "MB/s", "MB": return value >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
        case "s": return value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)
        case "µs": return String(format: "%.1f", value)
        case "CPU s": return String(format: "%.2f", value)
        default: return value >= 1000 ? String(format: "%.0f", value) : String(format: "%.1f", value)
        }
    }

    func markdown() -> String {
        let run = report.run
        var out = """
            # ContentStore vs peers and vs the machine

            Generated by `make compare` (`Benchmarks/Sources/compare`) on \(run.date). Do not edit by hand.

            Machine: \(run.cpu), \(run.cores) cores, \(String(format: "%.0f", run.memoryGiB)) GiB, \(run.kernel); scratch on `\(run.scratchDirectory)`. \
            Engine: \(run.engineCommit), the last commit that changed the ContentStore package's sources.
            \(hasEngineWorkloads ? "" : "<!-- ")Corpus: \(run.corpusFiles) files, \(String(format: "%.1f", Double(run.corpusBytes) / 1e6)) MB (\(String(format: "%.1f", Double(run.corpusUniqueBytes) / 1e6)) MB unique): \
            text \(mbString(run.corpusShares["text"])), source-like \(mbString(run.corpusShares["source"])), \
            random binary \(mbString(run.corpusShares["binary"])), exact duplicates \(mbString(run.corpusShares["duplicate"])).\(hasEngineWorkloads ? "" : " -->")
            \(run.rounds) rounds; in each, every contender runs each workload once, in rotated order \
            (Warehouse and DataArchive in the first \(Int(run.parameters["facadeRounds"] ?? 0)), versions of a large file in the first \(Int(run.parameters["versionRounds"] ?? 0))). Figures are medians over rounds; \
            ratios are medians of the per-round ratios (so both sides of each ratio ran under the same load). \
            MB = 10⁶ bytes. Whole run: \(String(format: "%.0f", run.elapsedSeconds)) s.


            """
        for group in groups {
            let rows = report.measurements.filter { $0.group == group }
            let columns = Name.columns.filter { name in rows.contains { $0.rounds[name] != nil } }
            let limited = rows.contains { $0.limit != nil }
            out += "## Results: \(group)\n\n"
            out += "| workload | unit | " + columns.joined(separator: " | ") + (limited ? " | limit | ContentStore / limit |" : " |") + "\n"
            out += "|---|---|" + columns.map { _ in "---:" }.joined(separator: "|") + (limited ? "|---:|---:|" : "|") + "\n"
            for m in rows {
                let cells = columns.map { Self.format(m.value($0), unit: m.unit) }
                let limit = Self.format(m.limit, unit: m.unit)
                let fraction = m.fractionOfLimit.map { String(format: "%.0f%%", $0 * 100) } ?? "—"
                out += "| \(m.workload) | \(m.unit) | " + cells.joined(separator: " | ") + (limited ? " | \(limit) | \(fraction) |" : " |") + "\n"
            }
            out += "\n"
        }
        out += "## ContentStore's advantage (× better; > 1 means ContentStore wins)\n\n"
        let peers = Name.peers.filter { peer in report.advantages.values.contains { $0[peer] != nil } }
        out += "| workload | " + peers.map { "vs \($0)" }.joined(separator: " | ") + " |\n"
        out += "|---|" + peers.map { _ in "---:" }.joined(separator: "|") + "|\n"
        for m in report.measurements {
            let row = peers.map { peer in report.advantages[m.id]?[peer].map { String(format: "%.2f×", $0) } ?? "—" }
            guard row.contains(where: { $0 != "—" }) else { continue }
            out += "| \(m.workload) | " + row.joined(separator: " | ") + " |\n"
        }
        out += everyRound()
        out += "\n![ratios](latest.svg)\n\n## Targets (issues 4, 5, 7, 8)\n\n"
        out += "A ratio's verdict is that of the median of the per-round ratios; every round's ratio is beside it, "
            + "and a target met by the median but missed in some rounds says so.\n\n"
        out += "| target | required | measured (median) | every round | verdict |\n|---|---|---|---|---|\n"
        for t in report.targets {
            var verdict = t.met.map { $0 ? "met" : "**missed**" } ?? "—"
            if t.met == true, let rounds = t.roundsMet, rounds.met < rounds.of {
                verdict = "met by the median; **missed in \(rounds.of - rounds.met) of \(rounds.of) rounds**"
            }
            out += "| \(t.target) | \(t.required) | \(t.measured) | \(t.roundRatios.map { Self.rounds($0, unit: t.roundUnit) } ?? "—") | \(verdict) |\n"
        }
        if !report.limits.isEmpty { out += machineLimits() }
        out += limitNotes()
        out += contenders()
        if !report.contentStoreIngestBreakdown.isEmpty {
            out += """

                ## Where ContentStore's ingest time went (per round)

                | round | wall s | process CPU s | worker CPU s | thread-s in `put` | thread-s in `write` (commit) |
                |---:|---:|---:|---:|---:|---:|

                """
            for row in report.contentStoreIngestBreakdown {
                let cells = ["round", "seconds", "cpuSeconds", "workerCPUSeconds", "threadSecondsInPut", "threadSecondsInCommit"].map { key in
                    key == "round" ? String(Int(row[key] ?? 0)) : String(format: "%.2f", row[key] ?? 0)
                }
                out += "| " + cells.joined(separator: " | ") + " |\n"
            }
            out += """

                \(run.cores) worker threads × wall seconds is the time available; worker CPU below that is time the
                threads were off the CPU (waiting for a core, for the disk, or for a lock). Profiles and the
                engine fixes they point to: [analysis.md](analysis.md).


                """
        }
        if !run.skipped.isEmpty {
            out += "Skipped: " + run.skipped.sorted { $0.key < $1.key }.map { "\($0.key) — \($0.value)" }.joined(separator: "; ") + ".\n\n"
        }
        for m in report.measurements where m.note != nil {
            out += "Note on *\(m.workload)*: \(m.note!).\n"
        }
        return out
    }

    private func machineLimits() -> String {
        let run = report.run, limits = report.limits.medianLimits
        let out = """

            ## Machine limits (probed in every round; median over rounds)

            | probe | value |
            |---|---:|
            | SHA-256 (`Digest.sha256`, OpenSSL), per CPU-second of one core | \(String(format: "%.0f", limits.sha256MBpsPerCore)) MB/s |
            | zstd level 3 of each unique file, per CPU-second of one core | \(String(format: "%.0f", limits.zstdMBpsPerCore)) MB/s → \(String(format: "%.1f", Double(limits.zstdStoredBytes) / 1e6)) MB |
            | ingest compute (SHA-256 all + zstd unique) on \(limits.cores) threads, wall, under the round's load | \(String(format: "%.0f", Double(run.corpusBytes) / 1e6 / limits.ingestComputeSeconds)) MB/s (\(String(format: "%.2f", limits.ingestComputeSeconds)) s; \(String(format: "%.2f", limits.ingestCPUSeconds)) CPU s) |
            | reading every corpus file from the page cache (`open`, `pread`, `close`), 1 core | \(String(format: "%.3f", limits.readCPUSeconds)) CPU s |
            | writing the stored bytes (a `pwrite` per unique file, then `fdatasync`), 1 core | \(String(format: "%.3f", limits.storeWriteCPUSeconds)) CPU s |
            | SHA-256 of all bytes on \(limits.cores) threads, wall | \(String(format: "%.0f", Double(run.corpusBytes) / 1e6 / limits.reingestComputeSeconds)) MB/s |
            | sequential 1 MiB writes + `fdatasync` | \(String(format: "%.0f", limits.writeMBps)) MB/s |
            | 128-byte append + `fdatasync`, median / p99 | \(String(format: "%.3f", limits.appendSyncMedianMs)) / \(String(format: "%.3f", limits.appendSyncP99Ms)) ms |
            | 4 KiB overwrite + `fdatasync`, median | \(String(format: "%.3f", limits.overwriteSyncMedianMs)) ms |
            | zstd decode + SHA-256 of a 4 KiB blob, 1 core | \(String(format: "%.0f", limits.pointReadOpsPerSecond)) /s |

            Per-core speeds are in CPU time, so they hold whatever else the machine runs; the wall-clock bounds are
            measured under the same load as the contenders in that round. Each ContentStore / limit figure is the
            median over rounds of the ratio to the limit probed in the same round.

            """
        return out
    }

    /// Per-round values, "8.94×, 7.02×, —, 8.57×".
    static func rounds(_ values: [Double?], unit: String) -> String {
        guard !values.isEmpty else { return "—" }
        return values.map { value in
            guard let value else { return "—" }
            return unit == "%" ? String(format: "%.0f%%", value * 100) : String(format: "%.2f×", value)
        }.joined(separator: ", ")
    }

    /// Every ratio of the advantage table, round by round.
    private func everyRound() -> String {
        var out = "\n### Every round's ratio\n\nThe medians above, with the ratio measured in each round (round 1 first).\n\n"
        out += "| workload | vs | every round | median |\n|---|---|---|---:|\n"
        var any = false
        for m in report.measurements {
            for peer in Name.peers {
                guard let values = report.advantageRounds[m.id]?[peer], let median = report.advantages[m.id]?[peer] else { continue }
                out += "| \(m.workload) | \(peer) | \(Self.rounds(values, unit: "×")) | \(String(format: "%.2f×", median)) |\n"
                any = true
            }
            let fractions = m.fractionRounds
            if let median = m.fractionOfLimit, fractions.contains(where: { $0 != nil }) {
                out += "| \(m.workload) | the machine limit (ContentStore / limit) | \(Self.rounds(fractions, unit: "%")) | \(String(format: "%.0f%%", median * 100)) |\n"
                any = true
            }
        }
        return any ? out : ""
    }

    /// What each "limit" column means, for the rows that have one.
    private func limitNotes() -> String {
        let notes = report.measurements.compactMap { m in m.limitNote.map { "- \(m.workload): \($0)\n" } }
        return notes.isEmpty ? "" : "\nHow each limit is derived:\n\n" + notes.joined()
    }

    /// The report's sections, in the order of their first measurement.
    private var groups: [String] {
        var seen: [String] = []
        for m in report.measurements where !seen.contains(m.group) { seen.append(m.group) }
        return seen
    }

    private var hasEngineWorkloads: Bool { report.measurements.contains { $0.group == Measurement.engineGroup } }

    private func contenders() -> String {
        let run = report.run
        var out = "\n## What each contender does\n\n"
        if hasEngineWorkloads {
            out += """
            - **ContentStore**: default configuration (durability `.full`, zstd 3, verified reads). Ingest: \(run.cores) threads \
            `put(contentsOf:)` each file and commit a record `file/<path>` → digest per 64 files. Collection: \
            `collectGarbage` with grace 0 (default pack rewrite threshold 0.5), then, for the space-reclaimed rows, \
            another pass with threshold 0.01.
            - **SQLite (GRDB)**: `DatabasePool` (WAL), `PRAGMA synchronous = FULL`; `blobs(digest BLOB PRIMARY KEY, rawLength, \
            compressed, data)`, `files(path, digest)`, `records(key, value)`. The same SHA-256 (`Digest.sha256`) and zstd 3 \
            outside the write transaction, existence checked before compressing, 64 files per transaction, a \
            `wal_checkpoint(TRUNCATE)` at the end. Collection deletes unreferenced blobs, then `VACUUM`s. Reads: one \
            `SELECT` per get on a pooled reader, then decompress and re-hash.
            - **file-per-key**: `objects/xx/<digest>` files written to a temporary name, `fsync`ed and renamed (no directory \
            `fsync`, as DataArchive did); the manifest is one file replaced the same way; records are one file each. \
            Collection rewrites the manifest, scans the object directories and unlinks what is unreferenced.
            - **restic** \(run.tools[Name.restic] ?? ""): `restic backup` of the corpus directory into a fresh repository \
            (default compression `auto`); `init` is not timed. Bulk ingest only.
            - **git** \(run.tools[Name.git] ?? ""): `git add --all` + `git commit` into a fresh repository (defaults: loose \
            zlib objects); `init` is not timed. Bulk ingest only.

            """
        }
        if groups.contains(WarehouseWorkload.group) {
            out += """
            - **ContentStore, Warehouse** (issue 4): `ProjectStorage` over a store with the default configuration. Add-step: \
            `fetchSnapshot(.stepIDs)` then `update(.addStep(...))` with 4 KiB step user data and one 256 KiB text-like \
            asset, new bytes every time; undo and redo likewise; fetch: `fetchSnapshot(.all)` (4 KiB project user data). \
            Each phase runs for `--warehouse-seconds` (undo and redo at most as many as were added; fetch half as long), \
            on 1 thread and on \(run.parameters["warehouseThreads"].map { String(Int($0)) } ?? "8") threads each with its \
            own project. Duplicate: `duplicateProject` of a project holding \(run.parameters["duplicateMiB"].map { String(Int($0)) } ?? "?") \
            assets of 1 MiB (text-like).
            - **directory-per-step** (issue 4): the original `WHSProjectStorage` layout (`<project>/data/{metadata, stepsIDs, \
            userData}`, `assets/`, `steps/<step>/{data/userData, assets/}`) and update order (the step's directory first, \
            then a new `data` directory swapped in atomically with `renameat2(RENAME_EXCHANGE)`, then dropped steps \
            removed), made durable: every file written or copied is `fsync`ed, every new directory `fsync`ed before \
            it is renamed into place and its parent after. Duplicate copies the tree (`copy_file_range`, fsynced) into \
            a temporary directory and renames it into place. See `Benchmarks/Sources/compare/DirectoryProjectStore.swift`. \
            This is our emulation of the original's layout, not the original's code. Per operation: \
            *add-step* reads `metadata` and `stepsIDs`, creates 4 directories, writes 5 files (the step's `userData` \
            and asset, a new `metadata` and `stepsIDs`, and `userData` copied with `copy_file_range`), makes 11 \
            `fsync`s (the 5 files and 6 directories: the step's `data/`, `assets/` and its own directory, `steps/`, \
            the new `data/` and the project), 1 `rename` and 1 `renameat2(RENAME_EXCHANGE)`, then removes the old \
            `data/` (3 unlinks and an rmdir, not synced) and any steps the add dropped; *undo* and *redo* read the \
            same two files, create 1 directory, write 3 files (1 copied), make 5 `fsync`s (3 files, the new `data/`, \
            the project), 1 exchange, and remove the old `data/`; *fetch* reads 3 files (`metadata`, `stepsIDs`, \
            `userData`) after a `stat` and an `access`; *duplicate* creates and `fsync`s every directory and copies \
            and `fsync`s every file of the project, then 1 `rename` and an `fsync` of the projects' directory. \
            ContentStore's Warehouse does each operation as one durable `write` (one WAL append and `fdatasync`, \
            shared by concurrent commits; a 256 KiB asset's pack bytes ride in that WAL batch, \
            `loggedPackBytesLimit` being 512 KiB), after a `put` of each new blob.

            """
        }
        if groups.contains(ArchiveWorkload.group) {
            out += """
            - **ContentStore, DataArchive** (issue 5): `DataArchive(store:)`, 64 keys used in turn, every value new \
            bytes. *async API*: `try await set / data(forKey:) / archiveCurrent(andSet:)` in one task; *callback API*: \
            each call's completion handler waited for; *fire-and-forget*: `set(key:data:)` without a handler, then a \
            `get` per key with one (per-key order makes it a barrier).
            - **file-per-key** (issue 5): mzaks' DataArchive layout (`data_archive/<key>/0.dat`, archives `1.dat`, \
            `2.dat`, …): set renames `0.dat` to `0.tmp`, writes `0.dat`, deletes `0.tmp`; archiveCurrent lists the \
            directory to number the archive, renames, writes; each durable (`fsync` of the file and of the key's \
            directory). Waiting calls run on the caller's thread; fire-and-forget sets go to a serial queue per key. \
            This is our emulation of the original's layout, not the original's code. Per operation: *set* 1 `rename`, \
            1 file written, 2 `fsync`s (the file, the key's directory), 1 `unlink`; *archiveCurrent* 1 directory \
            listing, 1 `rename`, 1 file written, 2 `fsync`s; *get* 1 file read (open, read, close), no verification; \
            a key's first write also creates its directory and `fsync`s `data_archive/`. ContentStore's DataArchive \
            does each write as one durable `write` (one WAL append and `fdatasync`, shared by concurrent commits) \
            after a `put` of the value's blob, and each `get` reads and verifies the blob (or serves it from the \
            read cache).

            """
        }
        if groups.contains(VersionsWorkload.group) {
            out += """
            - **ContentStore, restic \(run.tools[Name.restic] ?? ""), borg \(run.tools[Name.borg] ?? "")** (issue 8): the \
            same file edited in place between versions; per version, ContentStore `put(contentsOf:)` and a durable \
            record referencing it; restic `backup` (default compression `auto`) and `borg create --compression zstd,3` \
            (unencrypted repository) of the file, each a process of its own. Repository set-up is not timed.

            """
        }
        return out
    }

    private func mbString(_ bytes: Int?) -> String {
        String(format: "%.0f MB", Double(bytes ?? 0) / 1e6)
    }

    // MARK: SVG

    /// A horizontal bar chart of ContentStore's advantage over each peer, log scale, 1× marked.
    func svg() -> String {
        let colors = [Name.sqlite: "#4C78A8", Name.filePerKey: "#F58518", Name.directoryPerStep: "#E45756", Name.restic: "#54A24B",
                      Name.borg: "#72B7B2", Name.git: "#B279A2"]
        var rows: [(label: String, peer: String, value: Double)] = []
        for m in report.measurements {
            for peer in Name.peers {
                if let value = report.advantages[m.id]?[peer] { rows.append((m.workload, peer, value)) }
            }
        }
        let barHeight = 16.0, gap = 4.0, groupGap = 10.0
        let left = 560.0, plotWidth = 520.0, top = 50.0
        let maxValue = max(10, (rows.map(\.value).max() ?? 10) * 1.3)
        let minValue = min(0.1, (rows.map(\.value).min() ?? 0.1) / 1.3)
        func x(_ value: Double) -> Double {
            left + plotWidth * (log10(value) - log10(minValue)) / (log10(maxValue) - log10(minValue))
        }
        var y = top
        var body = ""
        var previous = ""
        for row in rows {
            if row.label != previous {
                if !previous.isEmpty { y += groupGap }
                body += "<text x=\"\(left - 8)\" y=\"\(y + barHeight - 4)\" text-anchor=\"end\" font-size=\"12\">\(escape(row.label))</text>\n"
                previous = row.label
            }
            let x0 = x(1), x1 = x(row.value)
            let (start, width) = x1 >= x0 ? (x0, x1 - x0) : (x1, x0 - x1)
            body += "<rect x=\"\(fmt(start))\" y=\"\(fmt(y))\" width=\"\(fmt(max(width, 1)))\" height=\"\(barHeight)\" fill=\"\(colors[row.peer] ?? "#888")\"><title>vs \(escape(row.peer)): \(String(format: "%.2f", row.value))×</title></rect>\n"
            body += "<text x=\"\(fmt(max(x0, x1) + 4))\" y=\"\(fmt(y + barHeight - 4))\" font-size=\"11\">\(String(format: "%.2f×", row.value))</text>\n"
            y += barHeight + gap
        }
        let height = y + 50
        var axis = ""
        for tick in [0.01, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] where tick >= minValue && tick <= maxValue {
            let tx = x(tick)
            axis += "<line x1=\"\(fmt(tx))\" y1=\"\(top - 6)\" x2=\"\(fmt(tx))\" y2=\"\(fmt(y))\" stroke=\"\(tick == 1 ? "#000" : "#ddd")\" stroke-width=\"\(tick == 1 ? 1.5 : 1)\"/>\n"
            axis += "<text x=\"\(fmt(tx))\" y=\"\(fmt(y + 16))\" text-anchor=\"middle\" font-size=\"11\">\(tick < 1 ? String(tick) : String(Int(tick)))×</text>\n"
        }
        var legend = ""
        var lx = 10.0
        for peer in Name.peers where rows.contains(where: { $0.peer == peer }) {
            legend += "<rect x=\"\(fmt(lx))\" y=\"\(fmt(y + 28))\" width=\"12\" height=\"12\" fill=\"\(colors[peer]!)\"/>"
            legend += "<text x=\"\(fmt(lx + 16))\" y=\"\(fmt(y + 38))\" font-size=\"12\">vs \(escape(peer))</text>\n"
            lx += 150
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(left + plotWidth + 80))" height="\(Int(height + 10))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="#fff"/>
            <text x="10" y="22" font-size="15" font-weight="bold">ContentStore's advantage over each peer (× better, log scale; right of the black line = ContentStore wins)</text>
            <text x="10" y="40" font-size="11" fill="#555">\(escape(report.run.date)) · \(report.run.cores) cores · corpus \(String(format: "%.0f", Double(report.run.corpusBytes) / 1e6)) MB · medians of per-round ratios over \(report.run.rounds) rounds</text>
            \(axis)\(body)\(legend)</svg>

            """
    }

    private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
