import BenchSupport
import ContentStore
import Foundation
import Synchronization

/// ContentStore with its default configuration (durability `.full`, zstd 3, verified reads).
final class ContentStoreContender: Contender {
    let name = "ContentStore"
    let store: Store
    private let pendingDigests = Mutex<[Digest]>([])
    /// Thread-seconds inside `put` and inside `write` during ingests (where the time goes).
    let putTime = TimeAccumulator(), commitTime = TimeAccumulator()
    /// CPU seconds of the ingest worker threads themselves.
    let workerCPU = Mutex<Double>(0)

    init(directory: String, readCacheMiB: Int? = nil) throws {
        var configuration = Store.Configuration()
        configuration.logger.logLevel = .warning  // results go to stdout; the store's info logs would mix in
        if let readCacheMiB { configuration.readCacheSize = readCacheMiB << 20 }
        store = try Store(at: URL(fileURLWithPath: directory), configuration: configuration)
    }

    func ingest(_ corpus: Corpus, threads: Int) throws {
        let queue = WorkQueue(count: corpus.files.count)
        let store = store, putTime = putTime, commitTime = commitTime
        try runThreads(threads) { [self] _ in
            let cpuStart = threadCPUSeconds()
            defer { let used = threadCPUSeconds() - cpuStart; workerCPU.withLock { $0 += used } }
            var batch: [(String, Digest)] = []
            while let index = queue.next() {
                let digest = try putTime.time { try store.put(contentsOf: URL(fileURLWithPath: corpus.absolutePath(index))) }
                batch.append((corpus.files[index].path, digest))
                if batch.count == 64 {
                    try commitTime.time { try Self.commit(batch, to: store) }
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { try commitTime.time { try Self.commit(batch, to: store) } }
        }
    }

    private static func commit(_ batch: [(String, Digest)], to store: Store) throws {
        try store.write { transaction in
            for (path, digest) in batch {
                try transaction.setRecord(Record(references: [digest]), forKey: recordKey(path))
            }
        }
    }

    /// Default collection first (packs rewritten only past 50% dead), then the compaction a user
    /// asks for to get the space back (rewrite threshold 0.01).
    func deleteAndCollect(_ paths: [String], diskUsage: () -> UInt64) throws -> [CollectStep] {
        var steps: [CollectStep] = []
        let collect = try measureSeconds {
            try store.write { transaction in
                for path in paths { try transaction.removeRecord(forKey: recordKey(path)) }
            }
            var options = GarbageCollectionOptions()
            options.gracePeriod = .zero
            _ = try store.collectGarbage(options)
        }
        steps.append(CollectStep(name: "delete + collect (default)", seconds: collect, diskBytesAfter: diskUsage()))
        let compact = try measureSeconds {
            var options = GarbageCollectionOptions()
            options.gracePeriod = .zero
            options.packRewriteThreshold = 0.01
            _ = try store.collectGarbage(options)
        }
        steps.append(CollectStep(name: "compaction (rewrite threshold 0.01)", seconds: compact, diskBytesAfter: diskUsage()))
        return steps
    }

    func commit(key: String, value: Data) throws {
        try store.write { try $0.setRecord(Record(value: value), forKey: key) }
    }

    func put(_ block: [UInt8]) throws -> Digest {
        let digest = try store.put(Data(block))
        pendingDigests.withLock { $0.append(digest) }
        return digest
    }

    /// References every blob put (so none is garbage) in one durable commit.
    func finishPuts() throws {
        let digests = pendingDigests.withLock { $0 }
        try store.write { try $0.setRecord(Record(references: digests), forKey: "reads") }
    }

    func read(_ digest: Digest) throws -> Int {
        try store.get(digest).count
    }

    func close() throws { try store.close() }
}
