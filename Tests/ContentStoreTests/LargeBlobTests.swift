import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Chunked blobs: content above the chunking threshold is stored as content-defined chunks under a
/// manifest tree, behind one digest (Docs/chunking.md).
@Suite(.blocking) struct LargeBlobTests {
    /// Small chunks and threshold, so a few MiB make a tree of several levels.
    static let small: ChunkingParameters = ChunkingParameters(minimumSize: 256, averageSize: 1024, maximumSize: 4096)

    static func configuration(chunking: ChunkingParameters = small, threshold: Int = 4097, clock: TestClock? = nil) -> Store.Configuration {
        var configuration = Store.Configuration.testing(clock: clock)
        configuration.chunking = chunking
        configuration.chunkingThreshold = threshold
        configuration.logger.logLevel = .error
        return configuration
    }

    /// What the index holds: every digest's count and kind, the chunked blobs' sizes and the referenced bytes.
    struct IndexImage: Equatable {
        var counts: [Digest: UInt32]
        var manifests: Set<Digest>
        var sizes: [Digest: UInt64]
        var referencedBytes: UInt64
        var logicalBytes: UInt64

        init(_ store: Store) {
            let blobs = store.core.withLock { $0.state.blobs }
            counts = Dictionary(uniqueKeysWithValues: blobs.entries.map { ($0.key, $0.value.refCount) })
            manifests = Set(blobs.entries.filter { $0.value.isManifest }.map(\.key))
            sizes = blobs.manifestSizes
            referencedBytes = blobs.referencedLogicalBytes
            logicalBytes = blobs.logicalBytes
        }
    }

    /// Round trip through every entry point at a size, with default parameters: sizes around the
    /// chunk bounds (below the threshold, plain blobs), around the threshold and well above it.
    @Test(arguments: [0, 1, 2047, 2048, 8192, 65535, 65536, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 64 << 20])
    func roundTripWithDefaults(size: Int) throws {
        try roundTrip(size: size, configuration: .testing(), chunked: size > Store.Configuration().chunkingThreshold)
    }

    /// Round trip with small parameters, the blob's size above the threshold by each chunk bound, so
    /// the last chunk lands on every boundary case; 4 MiB makes a tree three levels deep.
    @Test(arguments: [4096, 4097, 4098, 4097 + 255, 4097 + 256, 4097 + 1024, 4097 + 4095, 4097 + 4096, 4097 + 4097, 4 << 20])
    func roundTripWithSmallChunks(size: Int) throws {
        try roundTrip(size: size, configuration: Self.configuration(), chunked: size > 4097)
    }

    private func roundTrip(size: Int, configuration: Store.Configuration, chunked: Bool) throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: UInt64(size))
        let data = random.bytes(size)
        let file = dir.url.appendingPathComponent("input")
        try data.write(to: file)
        let store = try Store(at: dir.store, configuration: configuration)
        let digest = try store.put(data)
        #expect(digest == Digest.sha256(data))
        #expect(try store.put(contentsOf: file) == digest)
        #expect(store.core.withLock { $0.state.blobs[digest]?.isManifest } == chunked)
        #expect(try store.get(digest) == data)
        #expect(store.info(for: digest)?.size == size)
        let exported = dir.url.appendingPathComponent("exported")
        try store.export(digest, to: exported)
        #expect(try Data(contentsOf: exported) == data)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "blob") }
        #expect(store.refCount(of: digest) == 1)
        #expect(try store.statistics().referencedBytes == UInt64(size))
        let report = try store.verify(VerificationOptions(readData: true))
        #expect(report.isClean, "\(report.problems)")
        try store.close()
        let reopened = try Store(at: dir.store, configuration: configuration)
        #expect(try reopened.get(digest) == data)
        try reopened.close()
    }

    @Test func putOfDataAndOfFileChunkTheSame() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 7)
        let data = random.compressibleBytes(3 << 20)
        let file = dir.url.appendingPathComponent("input")
        try data.write(to: file)
        let first = try Store(at: dir.store, configuration: Self.configuration())
        try first.put(data)
        let fromData = IndexImage(first)
        try first.close()
        let other = TemporaryDirectory()
        let second = try Store(at: other.store, configuration: Self.configuration())
        try second.put(contentsOf: file)
        #expect(IndexImage(second) == fromData)
        try second.close()
    }

    @Test func treeHasSeveralLevelsAndNodesAreDomainSeparated() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 3)
        let data = random.bytes(4 << 20)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        let root = try store.local.readManifestNode(digest, isRoot: true, of: digest)
        #expect(root.level >= 2)
        let child = try store.local.readManifestNode(root.entries[0].digest, isRoot: false, of: digest)
        #expect(child.level == root.level - 1)
        let encoded = child.encoded()
        #expect(encoded.withUnsafeBytes { ManifestNode.digest(of: $0) } == root.entries[0].digest)
        #expect(Digest.sha256(encoded) != root.entries[0].digest)
        try store.close()
    }

    /// The known-answer vector of the node split: a node ends after an entry whose digest's last
    /// byte has its low five bits clear (Docs/chunking.md).
    @Test func nodeBoundariesFollowTheDigests() {
        var builder = ManifestBuilder()
        var emitted: [Int] = []
        for index in 0 ..< 200 {
            let digest = Digest.sha256(Data("chunk \(index)".utf8))
            emitted += builder.append(chunk: .init(digest: digest, length: 1)).map { $0.node.entries.count }
            if ManifestNode.endsNode(after: digest) { #expect(!emitted.isEmpty) }
        }
        let boundaries = (0 ..< 200).filter { ManifestNode.endsNode(after: Digest.sha256(Data("chunk \($0)".utf8))) }
        #expect(boundaries == [58, 66, 83, 197])
        let (rest, root) = builder.finish()
        #expect(emitted + rest.filter { $0.node.level == 0 }.map { $0.node.entries.count } == [59, 8, 17, 114, 2])
        #expect(root.level == 1)
        #expect(root.totalLength == 200)
    }

    @Test func editInTheMiddleAddsOnlyTheChangedChunks() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 11)
        var data = random.bytes(16 << 20)
        let store = try Store(at: dir.store, configuration: .testing())
        try store.put(data)
        let before = try store.statistics()
        data.replaceSubrange(8 << 20 ..< (8 << 20) + 4096, with: random.bytes(4096))
        try store.put(data)
        let after = try store.statistics()
        // About two chunks of 8 KiB and one node per level (three here) plus the root.
        #expect(after.blobCount - before.blobCount <= 8, "\(after.blobCount - before.blobCount) new blobs")
        #expect(after.liveStoredBytes - before.liveStoredBytes < 64 << 10, "\(after.liveStoredBytes - before.liveStoredBytes) new bytes")
        try store.close()
    }

    /// A chunked put writes the chunks bound for one pack with one write: two system calls per chunk
    /// cost more than the copy (about 240,000 per GiB with default parameters).
    @Test func chunksBoundForOnePackAreWrittenTogether() throws {
        let dir = TemporaryDirectory()
        let configuration = Self.configuration()
        let packWrites = Mutex(0)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            if call == .write && path.contains("/packs/") { packWrites.withLock { $0 += 1 } }
            return nil
        }
        let store = try Store(at: dir.store, configuration: configuration, seams: seams)
        var random = SeededRandom(seed: 11)
        let data = random.bytes(4 << 20)
        let digest = try store.put(data)
        let index = IndexImage(store)
        let chunks = index.counts.count - index.manifests.count
        #expect(chunks > 2000)
        // Each manifest node is still appended on its own (header and payload): about 1 in 32 entries.
        #expect(packWrites.withLock { $0 } < 2 * index.manifests.count + 16)
        #expect(try store.get(digest) == data)
    }

    /// Batched chunks that do not fit in the active pack roll over into new ones; every entry lands
    /// in the right pack's trailing index, and the blob reads back after reopening.
    @Test func batchedChunksRollOverIntoNewPacks() throws {
        let dir = TemporaryDirectory()
        var configuration = Self.configuration()
        configuration.packSizeTarget = 1 << 16
        let store = try Store(at: dir.store, configuration: configuration)
        var random = SeededRandom(seed: 12)
        let data = random.bytes(1 << 20)
        let digest = try store.put(data)
        #expect(try store.statistics().packCount >= 16)
        try store.close()
        let reopened = try Store(at: dir.store, configuration: configuration)
        #expect(try reopened.get(digest) == data)
        #expect(try reopened.verify(.init(readData: true)).isClean)
        let fileSystem = FileSystem(io: SystemFileIO())
        // Every pack but the last, which was active when the store closed, was sealed on rolling over.
        for pack in reopened.packs.packIDs.dropLast() {
            let file = try fileSystem.open(reopened.packs.path(of: pack), flags: O_RDONLY)
            let size = try file.size()
            #expect(size <= configuration.packSizeTarget + 4096)
            #expect(try PackReader.sealedIndexOffset(of: file, size: size) != nil)
        }
    }

    /// A write that fails in the middle of a batch leaves nothing unsettled: the entries written
    /// before it are dead space, and collection may judge their pack by the index.
    @Test func aFailedBatchWriteLeavesNoAppendUnsettled() throws {
        let dir = TemporaryDirectory()
        var configuration = Self.configuration()
        configuration.packSizeTarget = 1 << 16
        let failing = Mutex(false)
        var seams = Store.Seams()
        seams.fileIO = ScriptedFileIO { call, path in
            guard call == .write, path.hasSuffix(".pack"), failing.withLock({ $0 }) else { return nil }
            // The third pack's first write fails: two packs' groups of the batch are already written.
            return path.hasSuffix(PackFormat.fileName(3)) ? ENOSPC : nil
        }
        let store = try Store(at: dir.store, configuration: configuration, seams: seams)
        failing.withLock { $0 = true }
        var random = SeededRandom(seed: 13)
        #expect(throws: StoreError.code(.io)) { try store.put(random.bytes(1 << 20)) }
        for pack in store.packs.packIDs { #expect(!store.packs.hasUnsettledAppends(pack)) }
        failing.withLock { $0 = false }
        let data = random.bytes(1 << 20)
        let digest = try store.put(data)
        #expect(try store.get(digest) == data)
    }

    @Test func corruptedChunkFailsTheWholeBlobNamingTheChunk() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 5)
        let data = random.bytes(1 << 20)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        var node = try store.local.readManifestNode(digest, isRoot: true, of: digest)
        while node.level > 0 { node = try store.local.readManifestNode(node.entries[0].digest, isRoot: false, of: digest) }
        let chunk = node.entries[node.entries.count / 2].digest
        let (entry, file) = try store.local.locate(chunk)
        try store.close()
        try flipBit(in: URL(fileURLWithPath: file.path), at: Int(entry.location.offset) + PackFormat.entryHeaderSize + 10)

        for verifies in [true, false] {
            var configuration = Self.configuration()
            configuration.verifiesReads = verifies
            let reopened = try Store(at: dir.store, configuration: configuration)
            let error = try #require(throws: StoreError.self) { try reopened.get(digest) }
            #expect(error.code == .corrupted)
            #expect(error.message.contains(chunk.hex) && error.message.contains(digest.hex), "\(error.message)")
            #expect(error.path == file.path && error.offset == entry.location.offset)
            #expect(throws: StoreError.code(.corrupted)) { try reopened.export(digest, to: dir.url.appendingPathComponent("out")) }
            #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("out").path))
            let report = try reopened.verify(VerificationOptions(readData: true))
            #expect(report.problems.contains { $0.digest == chunk }, "\(report.problems)")
            #expect(report.problems.contains { $0.digest == digest && $0.message.contains(chunk.hex) }, "\(report.problems)")
            try reopened.close()
        }
    }

    @Test func getRefusesBlobsOverTheLimitAndExportStreamsThem() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 9)
        let data = random.bytes(2 << 20)
        var configuration = Self.configuration()
        configuration.limits.maximumGetSize = 1 << 20
        let store = try Store(at: dir.store, configuration: configuration)
        let digest = try store.put(data)
        #expect(throws: StoreError.code(.limitExceeded)) { try store.get(digest) }
        let small = try store.put(Data("small".utf8))
        #expect(try store.get(small) == Data("small".utf8))
        let exported = dir.url.appendingPathComponent("out")
        try store.export(digest, to: exported)
        #expect(try Data(contentsOf: exported) == data)
        try store.close()
    }

    @Test func invalidChunkingConfigurationIsRefused() {
        let dir = TemporaryDirectory()
        var configuration = Self.configuration()
        configuration.chunkingThreshold = Self.small.maximumSize
        #expect(throws: StoreError.code(.invalidArgument)) { try Store(at: dir.store, configuration: configuration) }
        configuration = Self.configuration(chunking: ChunkingParameters(minimumSize: 256, averageSize: 1000, maximumSize: 4096))
        #expect(throws: StoreError.code(.invalidArgument)) { try Store(at: dir.store, configuration: configuration) }
    }

    /// Chunks larger than the blob limit would be refused when read: a put that needs them is refused.
    @Test func chunksOverTheBlobLimitAreRefused() throws {
        let dir = TemporaryDirectory()
        var configuration = Self.configuration()
        configuration.limits.maximumBlobSize = 1000
        let store = try Store(at: dir.store, configuration: configuration)
        #expect(throws: StoreError.code(.limitExceeded)) { try store.put(Data(count: 10_000)) }
        #expect(try store.statistics().blobCount == 0)
        try store.close()
    }

    /// A dry run reports what the collection would remove through the whole cascade (the root, the
    /// nodes under it and the chunks only they held), not just the unreferenced root, and changes nothing.
    @Test(arguments: [false, true])
    func dryRunCountsTheCascade(sharingChunks: Bool) throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        var random = SeededRandom(seed: 14)
        let first = random.bytes(2 << 20)
        var second = first
        second.replaceSubrange(1 << 20 ..< (1 << 20) + 4096, with: random.bytes(4096))
        let one = try store.put(first)
        try store.write { try $0.setRecord(Record(references: [one]), forKey: "v1") }
        if sharingChunks {
            let two = try store.put(second)
            try store.write { try $0.setRecord(Record(references: [two]), forKey: "v2") }
        }
        try store.write { try $0.removeRecord(forKey: "v1") }
        clock.advance(by: 10)
        let before = IndexImage(store)
        let dryRun = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero, dryRun: true))
        #expect(IndexImage(store) == before)
        let real = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(real.blobsRemoved > (sharingChunks ? 3 : 1000))
        #expect(dryRun.blobsRemoved == real.blobsRemoved)
        #expect(dryRun.bytesFreed == real.bytesFreed)
        #expect(dryRun.logicalBytesFreed == real.logicalBytesFreed)
        #expect(dryRun.packsDeleted == real.packsDeleted && dryRun.packsRewritten == real.packsRewritten)
        try store.close()
    }

    /// Two versions share most chunks; dropping one collects what only it held, keeps the rest, and
    /// leaves exact counts. The counts after WAL replay and after a checkpoint equal the live ones.
    @Test func collectionKeepsSharedChunksAndCountsSurviveRecovery() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let configuration = Self.configuration(clock: clock)
        var random = SeededRandom(seed: 13)
        let first = random.bytes(2 << 20)
        var second = first
        second.replaceSubrange(1 << 20 ..< (1 << 20) + 4096, with: random.bytes(4096))
        let store = try Store(at: dir.store, configuration: configuration)
        let one = try store.put(first)
        let two = try store.put(second)
        try store.write {
            try $0.setRecord(Record(references: [one]), forKey: "v1")
            try $0.setRecord(Record(references: [two, two]), forKey: "v2")
        }
        let shared = IndexImage(store)
        #expect(shared.counts[two] == 2)
        try store.write { try $0.removeRecord(forKey: "v1") }
        clock.advance(by: 10)
        let report = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        let afterCollection = IndexImage(store)
        #expect(afterCollection.counts[one] == nil)
        // v1's root, the nodes on its path to the edit and its changed chunks: few, and no shared chunk.
        #expect(report.blobsRemoved >= 3 && report.blobsRemoved <= 12, "\(report)")
        #expect(shared.counts.count - afterCollection.counts.count == report.blobsRemoved)
        #expect(try store.get(two) == second)
        #expect(throws: StoreError.code(.notFound)) { try store.get(one) }
        #expect(try store.statistics().referencedBytes == 2 * UInt64(second.count))
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        // Nothing more is garbage.
        #expect(try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)).blobsRemoved == 0)
        try store.close()

        let replayed = try Store(at: dir.store, configuration: configuration)
        #expect(IndexImage(replayed) == afterCollection)
        try replayed.checkpoint()
        try replayed.close()
        let restored = try Store(at: dir.store, configuration: configuration)
        #expect(IndexImage(restored) == afterCollection)
        #expect(try restored.verify(VerificationOptions(readData: true)).isClean)
        try restored.write { try $0.removeRecord(forKey: "v2") }
        clock.advance(by: 10)
        _ = try restored.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        // The cascade leaves nothing of either version.
        #expect(IndexImage(restored).counts.isEmpty)
        try restored.close()
    }

    /// A collection racing a chunked put never takes a chunk the put has written or reused before
    /// the put places the manifest that references it.
    @Test func collectionDuringAPutSparesItsChunks() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 17)
        let base = random.bytes(3 << 20)
        let clock = TestClock()
        let store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        // An unreferenced earlier version whose chunks the next puts reuse, old enough to collect.
        // The versions put below stay within the grace period, which protects each root between its
        // `put` and the commit that references it: with no grace period a collection may take it in
        // that gap, as documented (a ThreadSanitizer build made that happen).
        try store.put(base)
        clock.advance(by: 7200)
        let done = Mutex(false)
        let collections = Mutex<(runs: Int, errors: [String])>((0, []))
        let collector = Thread {
            while !done.withLock({ $0 }) {
                do {
                    _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(3600)))
                    collections.withLock { $0.runs += 1 }
                } catch {
                    collections.withLock { $0.errors.append("\(error)") }
                }
            }
        }
        collector.start()
        var versions: [Digest: Data] = [:]
        for round in 0 ..< 6 {
            var version = base
            version.replaceSubrange(round * 4096 ..< round * 4096 + 100, with: random.bytes(100))
            let digest = try store.put(version)
            try store.write { try $0.setRecord(Record(references: [digest]), forKey: "v\(round)") }
            versions[digest] = version
        }
        done.withLock { $0 = true }
        while !collector.isFinished { usleep(1000) }
        // The collector really ran beside the puts, and every run of it succeeded.
        let collected = collections.withLock { $0 }
        #expect(collected.errors.isEmpty, "collections failed: \(collected.errors)")
        #expect(collected.runs > 0)
        for (digest, data) in versions { #expect(try store.get(digest) == data) }
        let report = try store.verify(VerificationOptions(readData: true))
        #expect(report.isClean, "\(report.problems)")
        try store.close()
    }
}
