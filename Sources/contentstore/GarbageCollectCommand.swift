import ArgumentParser
import ContentStore

/// `contentstore gc`: removes expired unreferenced blobs and compacts packs.
struct GarbageCollectCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Collect garbage: remove blobs unreferenced for the grace period, rewrite mostly dead packs.",
        discussion: """
            Takes the store's lock; when a process holds the store open, that process collects (over \
            its control socket) and the report is the same. Prints the blobs and bytes freed, the packs \
            rewritten and deleted, the bytes copied and the time taken.
            """)

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: ArgumentHelp(
        "Remove blobs unreferenced for at least this long (0, 30s, 10m, 1h, 2d).",
        discussion: "Default: the store's configured grace period (one hour).", valueName: "duration"))
    var grace: DurationArgument?

    @Flag(name: .long, help: "Report what would be removed and rewritten; change nothing.")
    var dryRun = false

    func run() throws {
        let collection = GarbageCollectionOptions(gracePeriod: grace?.duration, dryRun: dryRun)
        let progress = ProgressBar(enabled: options.showsProgress)
        let request = ControlRequest(command: .gc, gracePeriodSeconds: grace.map { $0.duration.inSeconds }, dryRun: dryRun)
        let report = try options.maintain(request, progress: progress, remote: \.gc) { store in
            try store.collectGarbage(collection) { progress.update($0) }
        }
        progress.finish()
        try options.emit(report) { Self.describe(report) }
    }

    static func describe(_ report: GarbageCollectionReport) -> String {
        let verb = report.dryRun ? "Would remove" : "Removed"
        var lines = [
            "\(verb) \(Format.count(report.blobsRemoved)) blobs: \(Format.bytes(report.bytesFreed)) stored, \(Format.bytes(report.logicalBytesFreed)) uncompressed",
            "Packs: \(report.packsRewritten) rewritten, \(report.packsDeleted) deleted (rewritten included), \(Format.bytes(report.bytesCopied)) copied",
            "\(report.dryRun ? "Would return" : "Returned") \(Format.bytes(report.bytesReclaimed)) to the disk in \(Format.duration(report.duration))",
        ]
        if report.packsSkipped > 0 {
            lines.append("Kept \(report.packsSkipped) damaged packs instead of rewriting them: run `contentstore verify`")
        }
        if report.dryRun { lines.append("(dry run: nothing was changed)") }
        return lines.joined(separator: "\n")
    }
}
