import ArgumentParser
import ContentStore

/// `contentstore gc`: removes expired unreferenced blobs and compacts packs.
struct GarbageCollectCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Collect garbage: remove blobs unreferenced for the grace period, rewrite mostly dead packs.",
        discussion: """
            Safe while nothing else has the store open (the command takes the store's lock). Prints the \
            blobs and bytes freed, the packs rewritten and deleted, the bytes copied and the time taken.
            """)

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: ArgumentHelp(
        "Remove blobs unreferenced for at least this long (0, 30s, 10m, 1h, 2d).",
        discussion: "Default: the store's configured grace period (one hour).", valueName: "duration"))
    var grace: DurationArgument?

    @Flag(name: .long, help: "Report what would be removed and rewritten; change nothing.")
    var dryRun = false

    func run() throws {
        let store = try options.openExistingStore()
        defer { try? store.close() }
        let collection = GarbageCollectionOptions(gracePeriod: grace?.duration, dryRun: dryRun)
        let progress = ProgressBar(enabled: options.showsProgress)
        let report = try store.collectGarbage(collection) { progress.update($0) }
        progress.finish()
        try store.close()
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
