import ArgumentParser
import ContentStore
import Foundation

/// `contentstore _torture`: workloads for crash tests, which kill this process at random moments
/// and check the store afterwards. Hidden: not for operators.
struct TortureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "_torture",
        abstract: "Test support: workloads meant to be killed at random moments.",
        shouldDisplay: false,
        subcommands: [TortureCollectCommand.self])
}

/// `contentstore _torture gc`: rounds of new blobs, new and removed records, and collections with
/// no grace period in small packs, so that a kill lands in drops, rewrites and pack deletions.
///
/// It only adds and removes records under `torture/`; everything else in the store must survive.
struct TortureCollectCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc", abstract: "Put, reference, release and collect in a loop (until killed or --rounds).")

    @OptionGroup var options: StoreOptions

    @Option(help: "Seed for the random choices.")
    var seed: UInt64 = 1

    @Option(help: "Rounds to run (default: until killed).")
    var rounds: Int = .max

    func run() throws {
        let store = try options.openStore { configuration in
            configuration.packSizeTarget = 1 << 16
            configuration.packRewriteThreshold = 0.3
        }
        defer { try? store.close() }
        var random = DemoRandom(seed: seed)
        var live = try store.keys(withPrefix: "torture/")
        for round in 0 ..< rounds {
            var added: [(String, Record)] = []
            for index in 0 ..< 24 {
                var bytes = [UInt8](repeating: 0, count: 2048 + Int(random.next() % 6144))
                for i in stride(from: 0, to: bytes.count, by: 8) {
                    withUnsafeBytes(of: random.next()) { word in
                        for j in 0 ..< min(8, bytes.count - i) { bytes[i + j] = word[j] }
                    }
                }
                let digest = try store.put(Data(bytes))
                if index % 2 == 0 {
                    added.append(("torture/\(seed)/\(round)/\(index)", Record(value: Data("\(round)".utf8), references: [digest])))
                }
            }
            let removing = live.filter { _ in random.next() % 2 == 0 }
            try store.write { transaction in
                for (key, record) in added { try transaction.setRecord(record, forKey: key) }
                for key in removing { try transaction.removeRecord(forKey: key) }
            }
            live = live.filter { !removing.contains($0) } + added.map(\.0)
            let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            if round % 4 == 3 { try store.checkpoint() }
            if options.json {
                try Terminal.printJSON(report)
            } else {
                Terminal.printResult("round \(round): removed \(report.blobsRemoved), rewrote \(report.packsRewritten), deleted \(report.packsDeleted)")
            }
        }
        try store.close()
    }
}
