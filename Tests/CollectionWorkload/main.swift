// The workload of the collection crash test (Tests/contentstoreTests/GarbageCollectionCrashTests.swift),
// which kills this process at random moments and checks the store afterwards: rounds of new blobs, new
// and removed records, and collections with no grace period in small packs, so that a kill lands in
// drops, rewrites and pack deletions. It only adds and removes records under `torture/`; everything
// else in the store must survive. It prints one line per round completed.
//
// Usage: CollectionWorkload <store directory> <seed> [<rounds>]   (rounds default: until killed)

import ContentStore
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard (2 ... 3).contains(arguments.count), let seed = UInt64(arguments[1]),
      let rounds = arguments.count == 3 ? Int(arguments[2]) : .max
else {
    FileHandle.standardError.write(Data("usage: CollectionWorkload <store> <seed> [<rounds>]\n".utf8))
    exit(64)
}

do {
    var configuration = Store.Configuration()
    configuration.packSizeTarget = 1 << 16
    configuration.packRewriteThreshold = 0.3
    let store = try Store(at: URL(fileURLWithPath: arguments[0], isDirectory: true), configuration: configuration)
    var random = SplitMix64(seed: seed)
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
        // Unbuffered: the test counts the rounds finished before the kill.
        FileHandle.standardOutput.write(Data("round \(round): removed \(report.blobsRemoved), rewrote \(report.packsRewritten), deleted \(report.packsDeleted)\n".utf8))
    }
    try store.close()
} catch {
    FileHandle.standardError.write(Data("CollectionWorkload: \(error)\n".utf8))
    exit(1)
}
