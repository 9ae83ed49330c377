import ContentStore
import Dispatch
import Foundation
import Synchronization

/// The engine itself: files put as blobs from several threads, records committed that reference
/// them, some records removed (leaving garbage for the demo's collection), reopen and checkpoint.
struct BlobsAndRecordsDemo: DemoSection {
    let title = "Blobs and records"

    func run(in context: DemoContext) throws {
        let corpus = context.step("corpus", { DemoCorpus(seed: context.seed, scale: context.scale) }, describe: { corpus, elapsed in
            ("\(corpus.files.count) files, \(Format.bytes(corpus.totalBytes)): \(corpus.count(.text)) text, \(corpus.count(.binary)) binary, "
                + "\(corpus.count(.duplicate)) exact duplicates (generated in \(Format.duration(elapsed)))",
             ["files": Double(corpus.files.count), "bytes": Double(corpus.totalBytes)])
        })

        let store = context.store
        let threads = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 8))
        let digests = try context.step("put", {
            try Self.putConcurrently(corpus.files.map(\.data), into: store, threads: threads)
        }, describe: { digests, elapsed in
            let distinct = Set(digests).count
            return ("\(Format.bytes(corpus.totalBytes)) in \(Format.duration(elapsed)) (\(Format.throughput(corpus.totalBytes, elapsed)), "
                + "\(threads) threads) → \(distinct) distinct blobs",
                    ["seconds": elapsed.inSeconds, "bytesPerSecond": Double(corpus.totalBytes) / max(elapsed.inSeconds, 1e-9),
                     "distinctBlobs": Double(distinct)])
        })

        // One record per file, plus albums that reference ten files each.
        var random = DemoRandom(seed: context.seed ^ 0xA1B2)
        var records: [(String, Record)] = []
        for (file, digest) in zip(corpus.files, digests) {
            let value = Data("{\"kind\":\"\(file.kind.rawValue)\",\"size\":\(file.data.count)}".utf8)
            records.append(("demo/files/" + file.name, Record(value: value, references: [digest])))
        }
        let albums = max(1, corpus.files.count / 20)
        for album in 0 ..< albums {
            let members = (0 ..< 10).map { _ in digests[Int(random.next() % UInt64(digests.count))] }
            records.append(("demo/albums/\(album)", Record(value: Data("album \(album)".utf8), references: members)))
        }
        let batch = 25
        try context.step("commit", {
            for start in stride(from: 0, to: records.count, by: batch) {
                try store.write { transaction in
                    for (key, record) in records[start ..< min(start + batch, records.count)] {
                        try transaction.setRecord(record, forKey: key)
                    }
                }
            }
        }, describe: { _, elapsed in
            let transactions = (records.count + batch - 1) / batch
            return ("\(records.count) records in \(transactions) durable transactions, \(Format.duration(elapsed))",
                    ["records": Double(records.count), "transactions": Double(transactions)])
        })

        let statistics = try store.statistics()
        context.step("dedup", {}, describe: { _, _ in
            ("records reference \(Format.bytes(statistics.referencedBytes)); stored once: \(Format.bytes(statistics.logicalBytes)) → "
                + Format.ratio(statistics.deduplicationRatio), ["ratio": statistics.deduplicationRatio])
        })
        context.step("compression", {}, describe: { _, _ in
            ("\(Format.bytes(statistics.logicalBytes)) → \(Format.bytes(statistics.liveStoredBytes)) in packs → " + Format.ratio(statistics.compressionRatio),
             ["ratio": statistics.compressionRatio])
        })

        // Remove about a third of the files and half the albums: their blobs become garbage unless
        // a duplicate or an album still references them.
        let removed = records.enumerated().filter { index, entry in
            entry.0.hasPrefix("demo/albums/") ? index % 2 == 0 : random.next() % 3 == 0
        }.map(\.element.0)
        try context.step("remove", {
            try store.write { transaction in
                for key in removed { try transaction.removeRecord(forKey: key) }
            }
            return try store.statistics().unreferencedBlobCount
        }, describe: { unreferenced, elapsed in
            ("\(removed.count) records removed in one transaction (\(Format.duration(elapsed))) → \(unreferenced) blobs unreferenced",
             ["recordsRemoved": Double(removed.count), "unreferencedBlobs": Double(unreferenced)])
        })

        try context.reopen()
        try context.step("checkpoint", { try context.store.checkpoint() }, describe: { _, elapsed in
            ("WAL folded into a checkpoint in \(Format.duration(elapsed))", ["seconds": elapsed.inSeconds])
        })
    }

    /// Puts `blobs` from `threads` threads at once; hashing and compression run in parallel.
    static func putConcurrently(_ blobs: [Data], into store: Store, threads: Int) throws -> [Digest] {
        let results = Mutex<[Int: Result<Digest, any Error>]>([:])
        let next = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < blobs.count else { return }
                let result = Result { try store.put(blobs[index]) }
                results.withLock { $0[index] = result }
            }
        }
        return try results.withLock { results in try (0 ..< blobs.count).map { try results[$0]!.get() } }
    }
}
