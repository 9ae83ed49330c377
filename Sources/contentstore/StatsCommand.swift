import ArgumentParser
import ContentStore

/// `contentstore stats`: what the store holds.
struct StatsCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show blobs, records, logical vs stored bytes, deduplication and compression ratios, WAL size, packs.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let progress = ProgressBar(enabled: false)
        let statistics = try options.maintain(ControlRequest(command: .stats), progress: progress, remote: \.stats) { try $0.statistics() }
        try options.emit(statistics) { Self.describe(statistics, path: options.storePath) }
    }

    static func describe(_ s: Statistics, path: String) -> String {
        Format.table([
            ("store", path),
            ("blobs", "\(Format.count(s.blobCount)) (\(Format.count(s.unreferencedBlobCount)) unreferenced, \(Format.bytes(s.unreferencedLogicalBytes)))"),
            ("records", Format.count(s.recordCount)),
            ("logical bytes", "\(Format.bytes(s.logicalBytes)) (\(Format.count(s.logicalBytes)) B)"),
            ("stored bytes", "\(Format.bytes(s.storedBytes)) in \(Format.count(s.packCount)) packs: \(Format.bytes(s.liveStoredBytes)) live, \(Format.bytes(s.deadStoredBytes)) dead or overhead"),
            ("referenced", "\(Format.bytes(s.referencedBytes)) counting every reference"),
            ("deduplication", Format.ratio(s.deduplicationRatio)),
            ("compression", Format.ratio(s.compressionRatio)),
            ("WAL", Format.bytes(s.walBytes)),
        ])
    }
}
