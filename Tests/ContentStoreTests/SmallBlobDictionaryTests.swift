internal import CZstd
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Small whole blobs compressed with a dictionary trained on the first of them, whose frames keep
/// raw literals (LocalEngine+SmallBlobDictionary, Docs/on-disk-format.md#dictionaries).
@Suite(.blocking) struct SmallBlobDictionaryTests {
    static let blockSize = 4096
    /// Blocks that complete the training sample (the last of them trains).
    static let trainingBlocks = LocalEngine.smallBlobTrainingBytes / blockSize

    static func configuration(verifiesReads: Bool = true, clock: TestClock? = nil) -> Store.Configuration {
        var configuration = Store.Configuration.testing(clock: clock)
        configuration.readCacheSize = 0
        configuration.verifiesReads = verifiesReads
        return configuration
    }

    /// Distinct 4 KiB text blocks, all drawn from one vocabulary (what a dictionary learns).
    static func blocks(_ count: Int, from first: UInt64 = 0) -> [Data] {
        let text = ChunkDictionaryTests.text(count * blockSize, seed: 41 &+ first)
        return (0 ..< count).map { text.subdata(in: $0 * blockSize ..< ($0 + 1) * blockSize) }
    }

    /// Puts `blocks` and waits for the training the sample started in the background, so that every
    /// later small blob meets the decision.
    @discardableResult
    static func putTrainingSample(_ blocks: some Sequence<Data>, into store: Store) throws -> [Digest] {
        let digests = try blocks.map { try store.put($0) }
        store.local.background.waitUntilIdle()
        return digests
    }

    /// A closed store in `dir` holding the training sample and one small blob after it, which the
    /// dictionary compressed; the blocks and their digests, that blob's last.
    static func storeWithABlobAfterTheSample(_ dir: TemporaryDirectory) throws -> (blocks: [Data], digests: [Digest]) {
        let blocks = Self.blocks(Self.trainingBlocks + 1)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digests = try Self.putTrainingSample(blocks.dropLast(), into: store) + [store.put(blocks.last!)]
        try store.close()
        return (blocks, digests)
    }

    static func entry(_ store: Store, _ digest: Digest) throws -> BlobEntry {
        try #require(store.core.withLock { $0.state.blobs[digest] })
    }

    /// The pack entry of `digest`: its header and payload as they are on the disk.
    static func packEntry(_ dir: TemporaryDirectory, _ digest: Digest) throws -> (path: String, offset: UInt64, header: PackFormat.EntryHeader, payload: [UInt8]) {
        try #require(try ChunkDictionaryTests.packEntries(dir.store).first { $0.header.digest == digest && !$0.header.isDictionary })
    }

    @Test func smallBlobsAfterTheTrainingSampleUseTheDictionaryAndReadBack() throws {
        let dir = TemporaryDirectory()
        let blocks = Self.blocks(Self.trainingBlocks + 200)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digests = try Self.putTrainingSample(blocks.prefix(Self.trainingBlocks), into: store)
            + blocks.dropFirst(Self.trainingBlocks).map { try store.put($0) }
        try store.write { transaction in
            for (index, digest) in digests.enumerated() { try transaction.setRecord(Record(references: [digest]), forKey: "b\(index)") }
        }
        for (digest, block) in zip(digests, blocks) { #expect(try store.get(digest) == block) }
        try store.close()

        let entries = try ChunkDictionaryTests.packEntries(dir.store)
        let users = Set(entries.filter(\.header.usesDictionary).map(\.header.digest))
        // The sample's blobs (and the one that completed it) went without; every later one with.
        #expect(digests.prefix(Self.trainingBlocks).allSatisfy { !users.contains($0) })
        #expect(digests.dropFirst(Self.trainingBlocks).allSatisfy { users.contains($0) })
        #expect(try ChunkDictionaryTests.expectOneDictionaryPerPackUsedByItsEntries(dir.store) == 200)
        let dictionary = try #require(entries.first { $0.header.isDictionary })
        #expect(dictionary.header.rawLength <= UInt32(LocalEngine.smallBlobDictionarySize))

        // No bytes lost to raw literals on content the dictionary fits.
        let stored = entries.filter { users.contains($0.header.digest) }.reduce(0) { $0 + $1.payload.count }
        let plain = try blocks.suffix(200).reduce(0) { total, block in
            try total + block.withUnsafeBytes { raw in
                var output = [UInt8](repeating: 0, count: raw.count)
                return try #require(output.withUnsafeMutableBytes {
                    Zstd.compress(raw, into: $0, level: 3, minimumMatch: LocalEngine.smallBlobMinimumMatch)
                })
            }
        }
        #expect(Double(stored) <= 1.03 * Double(plain), "\(stored) bytes with the dictionary, \(plain) without")

        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        for (digest, block) in zip(digests, blocks) { #expect(try reopened.get(digest) == block) }
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// Known answer: the payload of a blob that uses the dictionary is the offset of the pack's
    /// dictionary entry (u64, little-endian) and then exactly the frame zstd's own API makes of the
    /// blob with that dictionary loaded, level 3, minMatch 7, literals uncompressed, no dictionary
    /// id; and zstd's own decoder, given the dictionary, returns the blob.
    @Test func theFrameIsZstdsOwnWithRawLiterals() throws {
        let dir = TemporaryDirectory()
        let blocks = Self.blocks(Self.trainingBlocks + 1)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digests = try Self.putTrainingSample(blocks.dropLast(), into: store) + [store.put(blocks.last!)]
        try store.close()

        let user = try Self.packEntry(dir, digests.last!)
        #expect(user.header.usesDictionary && user.header.isCompressed)
        let dictionaryEntry = try #require(try ChunkDictionaryTests.packEntries(dir.store).first { $0.header.isDictionary && $0.path == user.path })
        #expect(ChunkDictionaryTests.dictionaryReference(user.payload) == dictionaryEntry.offset)
        let dictionary = try Self.decodedDictionary(dictionaryEntry.header, dictionaryEntry.payload)
        #expect(Digest.sha256(dictionary) == dictionaryEntry.header.digest)

        let frame = Array(user.payload.dropFirst(PackFormat.dictionaryReferenceSize))
        #expect(frame == Self.referenceFrame(blocks.last!, dictionary: dictionary))
        var decoded = [UInt8](repeating: 0, count: Self.blockSize)
        let context = try #require(ZSTD_createDCtx())
        defer { ZSTD_freeDCtx(context) }
        let written = ZSTD_decompress_usingDict(context, &decoded, decoded.count, frame, frame.count, dictionary, dictionary.count)
        #expect(written == Self.blockSize)
        #expect(Data(decoded) == blocks.last!)
    }

    /// Puts keep a context set up for the dictionary from one frame to the next: every frame, also
    /// one after a frame that did not fit (content unlike the samples), is still zstd's own with
    /// the dictionary, no dictionary id and raw literals.
    @Test func framesFromAKeptContextAreZstdsOwn() throws {
        let dir = TemporaryDirectory()
        let blocks = Self.blocks(Self.trainingBlocks + 4)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        try Self.putTrainingSample(blocks.prefix(Self.trainingBlocks), into: store)
        var random = SeededRandom(seed: 7)
        let letters = Data((0 ..< Self.blockSize).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 16) })
        let later = Array(blocks.suffix(4))
        var digests = try later.prefix(2).map { try store.put($0) }
        try store.put(letters)  // its frame does not fit: stored without the dictionary
        digests += try later.suffix(2).map { try store.put($0) }
        try store.close()

        let dictionaryEntry = try #require(try ChunkDictionaryTests.packEntries(dir.store).first { $0.header.isDictionary })
        let dictionary = try Self.decodedDictionary(dictionaryEntry.header, dictionaryEntry.payload)
        for (blob, digest) in zip(later, digests) {
            let entry = try Self.packEntry(dir, digest)
            #expect(entry.header.usesDictionary)
            #expect(Array(entry.payload.dropFirst(PackFormat.dictionaryReferenceSize)) == Self.referenceFrame(blob, dictionary: dictionary))
        }
    }

    /// The frame made through zstd's parameter API, independently of the engine's `ZSTD_CDict`.
    static func referenceFrame(_ blob: Data, dictionary: [UInt8]) -> [UInt8] {
        let context = ZSTD_createCCtx()!
        defer { ZSTD_freeCCtx(context) }
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 3)
        ZSTD_CCtx_setParameter(context, ZSTD_c_minMatch, Int32(LocalEngine.smallBlobMinimumMatch))
        ZSTD_CCtx_setParameter(context, ZSTD_c_experimentalParam5, Int32(ZSTD_ps_disable.rawValue))  // literalCompressionMode
        ZSTD_CCtx_setParameter(context, ZSTD_c_dictIDFlag, 0)
        ZSTD_CCtx_loadDictionary(context, dictionary, dictionary.count)
        var output = [UInt8](repeating: 0, count: blob.count + 64)
        let written = blob.withUnsafeBytes { ZSTD_compress2(context, &output, output.count, $0.baseAddress, $0.count) }
        return ZSTD_isError(written) != 0 ? [] : Array(output[..<written])
    }

    static func decodedDictionary(_ header: PackFormat.EntryHeader, _ payload: [UInt8]) throws -> [UInt8] {
        guard header.isCompressed else { return payload }
        var bytes = [UInt8](repeating: 0, count: Int(header.rawLength))
        try payload.withUnsafeBytes { frame in try bytes.withUnsafeMutableBytes { try Zstd.decompress(frame: frame, into: $0) } }
        return bytes
    }

    /// Content unlike the samples (letters of a 16-letter alphabet, no words): with raw literals its
    /// frame would be nearly the blob's size, so it is compressed without the dictionary; more of
    /// the samples' text still uses it.
    @Test func contentTheDictionaryDoesNotFitIsCompressedWithoutIt() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let blocks = Self.blocks(Self.trainingBlocks + 1)
        try Self.putTrainingSample(blocks.dropLast(), into: store)
        #expect(store.local.smallBlobs.current != nil)
        var random = SeededRandom(seed: 5)
        let letters = Data((0 ..< Self.blockSize).map { _ in UInt8(ascii: "a") + UInt8(random.next() % 16) })
        let fitting = blocks.last!
        let (lettersDigest, fittingDigest) = (try store.put(letters), try store.put(fitting))
        let lettersEntry = try Self.entry(store, lettersDigest)
        #expect(lettersEntry.isCompressed && Int(lettersEntry.storedLength) < 3 * Self.blockSize / 4)
        #expect(try store.get(lettersDigest) == letters)
        #expect(try store.get(fittingDigest) == fitting)
        try store.close()
        #expect(try !Self.packEntry(dir, lettersDigest).header.usesDictionary)
        #expect(try Self.packEntry(dir, fittingDigest).header.usesDictionary)
    }

    /// Incompressible small blobs are stored raw and never sampled: no dictionary is trained.
    @Test func incompressibleSmallBlobsTrainNoDictionary() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: Self.configuration())
        var random = SeededRandom(seed: 6)
        try Self.putTrainingSample((0 ..< Self.trainingBlocks + 10).map { _ in Data(random.bytes(Self.blockSize)) }, into: store)
        #expect(store.local.smallBlobs.isSampling)
        try store.close()
        #expect(try !ChunkDictionaryTests.packEntries(dir.store).contains { $0.header.isDictionary || $0.header.usesDictionary })
    }

    /// A reopened store reads what the earlier open wrote, and compresses its own small blobs with
    /// the dictionary that open saved from the first put on: one dictionary for the store, one
    /// decoder for its reads.
    @Test func aReopenedStoreKeepsTheSavedDictionary() throws {
        let dir = TemporaryDirectory()
        let all = Self.blocks(Self.trainingBlocks + 40)
        let (first, second) = (Array(all.prefix(Self.trainingBlocks + 20)), Array(all.suffix(20)))
        var store = try Store(at: dir.store, configuration: Self.configuration())
        let firstDigests = try Self.putTrainingSample(first.prefix(Self.trainingBlocks), into: store)
            + first.dropFirst(Self.trainingBlocks).map { try store.put($0) }
        let trained = try #require(store.local.smallBlobs.current)
        try store.close()
        #expect(FileManager.default.fileExists(atPath: dir.store.appendingPathComponent("small-blobs.dict").path))

        store = try Store(at: dir.store, configuration: Self.configuration())
        #expect(store.local.smallBlobs.current?.digest == trained.digest)
        let secondDigests = try second.map { try store.put($0) }
        for (digest, block) in zip(firstDigests + secondDigests, first + second) { #expect(try store.get(digest) == block) }
        try store.close()

        let entries = try ChunkDictionaryTests.packEntries(dir.store)
        #expect(Set(entries.filter(\.header.isDictionary).map(\.header.digest)) == [trained.digest])
        let users = Set(entries.filter(\.header.usesDictionary).map(\.header.digest))
        #expect(secondDigests.allSatisfy { users.contains($0) })
        #expect(try ChunkDictionaryTests.expectOneDictionaryPerPackUsedByItsEntries(dir.store) == 40)
    }

    /// Small blobs spread over more packs than the decoders kept (``ChunkDictionaries/cachedDictionaries``):
    /// each pack holds its own copy of the one dictionary, named by its entries, and every blob
    /// reads back, twice over in random order.
    @Test func manyPacksEachCarryTheOneDictionary() throws {
        let dir = TemporaryDirectory()
        var configuration = Self.configuration()
        configuration.packSizeTarget = 64 << 10
        let blocks = Self.blocks(Self.trainingBlocks + 600)
        let store = try Store(at: dir.store, configuration: configuration)
        let digests = try Self.putTrainingSample(blocks.prefix(Self.trainingBlocks), into: store)
            + blocks.dropFirst(Self.trainingBlocks).map { try store.put($0) }
        var random = SeededRandom(seed: 9)
        for _ in 0 ..< 2 * digests.count {
            let index = Int(random.next() % UInt64(digests.count))
            #expect(try store.get(digests[index]) == blocks[index])
        }
        try store.close()
        let entries = try ChunkDictionaryTests.packEntries(dir.store)
        let dictionaries = entries.filter(\.header.isDictionary)
        #expect(Set(dictionaries.map(\.header.digest)).count == 1)
        #expect(Set(dictionaries.map(\.path)).count > ChunkDictionaries.cachedDictionaries)
        #expect(try ChunkDictionaryTests.expectOneDictionaryPerPackUsedByItsEntries(dir.store) == 600)
    }

    /// A damaged saved dictionary is not used: the store samples and trains anew, replaces the file,
    /// and reads the blobs the old dictionary compressed from their packs' own copy.
    @Test func aDamagedSavedDictionaryIsReplacedNotUsed() throws {
        let dir = TemporaryDirectory()
        let first = Self.blocks(Self.trainingBlocks + 5)
        var store = try Store(at: dir.store, configuration: Self.configuration())
        let firstDigests = try Self.putTrainingSample(first, into: store)
        let trained = try #require(store.local.smallBlobs.current)
        try store.close()
        let saved = dir.store.appendingPathComponent("small-blobs.dict")
        try flipBit(in: saved, at: PackFormat.entryHeaderSize + 50, bit: 1)

        store = try Store(at: dir.store, configuration: Self.configuration())
        #expect(store.local.smallBlobs.isSampling)
        for (digest, block) in zip(firstDigests, first) { #expect(try store.get(digest) == block) }
        try Self.putTrainingSample(Self.blocks(Self.trainingBlocks, from: 3), into: store)
        let retrained = try #require(store.local.smallBlobs.current)
        #expect(retrained.digest != trained.digest)
        try store.close()
        let file = try FileSystem(io: SystemFileIO()).open(saved.path, flags: O_RDONLY)
        #expect(try ChunkDictionary.readVerified(from: file, at: 0, limits: Store.Limits()).header.digest == retrained.digest)
    }

    /// One flipped bit in the dictionary entry: a blob that uses it reads as `corrupted` naming the
    /// dictionary's pack and offset, with or without re-hashing, never as wrong bytes; verify reports it.
    @Test(arguments: [false, true])
    func aDamagedDictionaryIsCorruptedNeverWrongBytes(verifiesReads: Bool) throws {
        let dir = TemporaryDirectory()
        let (blocks, digests) = try Self.storeWithABlobAfterTheSample(dir)
        let dictionary = try #require(try ChunkDictionaryTests.packEntries(dir.store).first { $0.header.isDictionary })
        try flipBit(in: URL(fileURLWithPath: dictionary.path), at: Int(dictionary.offset) + PackFormat.entryHeaderSize + 100, bit: 2)

        let reopened = try Store(at: dir.store, configuration: Self.configuration(verifiesReads: verifiesReads))
        let error = try #require(throws: StoreError.self) { try reopened.get(digests.last!) }
        #expect(error.code == .corrupted)
        #expect(error.path == dictionary.path && error.offset == dictionary.offset, "\(error.message)")
        #expect(try reopened.get(digests[0]) == blocks[0])
        let report = try reopened.verify(VerificationOptions(readData: true))
        #expect(report.problems.contains { $0.digest == digests.last! && $0.message.contains("dictionary") }, "\(report.problems)")
        try reopened.close()
    }

    /// Collection rewrites a pack whose small blobs use the dictionary: the live ones move with one
    /// copy of it, frames unchanged, and read back; verify finds nothing.
    @Test func collectionMovesTheDictionaryWithTheSmallBlobsThatUseIt() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        let blocks = Self.blocks(Self.trainingBlocks + 40)
        var store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        let digests = try Self.putTrainingSample(blocks.prefix(Self.trainingBlocks), into: store)
            + blocks.dropFirst(Self.trainingBlocks).map { try store.put($0) }
        let kept = Array(digests.suffix(20))
        try store.write { transaction in
            for (index, digest) in kept.enumerated() { try transaction.setRecord(Record(references: [digest]), forKey: "k\(index)") }
        }
        try store.close()
        let framesBefore = Set(try ChunkDictionaryTests.packEntries(dir.store).filter(\.header.usesDictionary)
            .map { $0.payload.dropFirst(PackFormat.dictionaryReferenceSize) })

        clock.advance(by: 7200)
        store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        options.packRewriteThreshold = 0.2
        let report = try store.collectGarbage(options)
        #expect(report.packsRewritten >= 1, "\(report)")
        for (digest, block) in zip(digests.suffix(20), blocks.suffix(20)) { #expect(try store.get(digest) == block) }
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        try store.close()

        let after = try ChunkDictionaryTests.packEntries(dir.store)
        #expect(try ChunkDictionaryTests.expectOneDictionaryPerPackUsedByItsEntries(dir.store) == 20)
        #expect(Set(after.filter(\.header.usesDictionary).map { $0.payload.dropFirst(PackFormat.dictionaryReferenceSize) }).isSubset(of: framesBefore))
    }

    /// The put that completes the sample returns before the dictionary is trained: the training,
    /// held here on its background thread, has not installed one when the put returns, and puts
    /// meanwhile go without; once the background work drains, the dictionary is installed, used by
    /// later puts, and saved for the next open.
    @Test func thePutThatCompletesTheSampleDoesNotTrain() throws {
        let dir = TemporaryDirectory()
        let gate = DispatchSemaphore(value: 0)
        let trainer = Mutex<(thread: pthread_t?, started: Int)>((nil, 0))
        var seams = Store.Seams()
        seams.beforeTrainingSmallBlobDictionary = {
            trainer.withLock { $0 = (pthread_self(), $0.started + 1) }
            // Bounded: a put that trained inline would wait here, and then be seen to have trained.
            _ = gate.wait(timeout: .now() + 30)
        }
        let store = try Store(at: dir.store, configuration: Self.configuration(), seams: seams)
        let blocks = Self.blocks(Self.trainingBlocks + 20)
        var digests = try blocks.prefix(Self.trainingBlocks).map { try store.put($0) }
        #expect(store.local.smallBlobs.current == nil && !store.local.smallBlobs.isSampling)
        #expect(waitUntil(timeout: 60) { trainer.withLock { $0.started == 1 } })
        let trainerThread = try #require(trainer.withLock { $0.thread })
        #expect(pthread_equal(trainerThread, pthread_self()) == 0, "the training ran on the putting thread")
        // Puts while it trains: stored without the dictionary, and they start no second training.
        digests += try blocks.dropFirst(Self.trainingBlocks).prefix(10).map { try store.put($0) }
        #expect(store.local.smallBlobs.current == nil)

        gate.signal()
        store.local.background.waitUntilIdle()
        let trained = try #require(store.local.smallBlobs.current)
        digests += try blocks.suffix(10).map { try store.put($0) }
        for (digest, block) in zip(digests, blocks) { #expect(try store.get(digest) == block) }
        try store.close()
        #expect(trainer.withLock { $0.started } == 1)

        let users = Set(try ChunkDictionaryTests.packEntries(dir.store).filter(\.header.usesDictionary).map(\.header.digest))
        #expect(digests.prefix(Self.trainingBlocks + 10).allSatisfy { !users.contains($0) })
        #expect(digests.suffix(10).allSatisfy { users.contains($0) })
        let file = try FileSystem(io: SystemFileIO()).open(dir.store.appendingPathComponent("small-blobs.dict").path, flags: O_RDONLY)
        #expect(try ChunkDictionary.readVerified(from: file, at: 0, limits: Store.Limits()).header.digest == trained.digest)
    }

    /// A close while the dictionary trains waits for the training, which installs and saves it whole
    /// before the store is released: the next open adopts it, and nothing is left half-written.
    @Test func aCloseWhileTrainingWaitsAndTheNextOpenAdoptsTheDictionary() throws {
        let dir = TemporaryDirectory()
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        var seams = Store.Seams()
        seams.beforeTrainingSmallBlobDictionary = {
            started.signal()
            _ = gate.wait(timeout: .now() + 30)
        }
        let store = try Store(at: dir.store, configuration: Self.configuration(), seams: seams)
        let digests = try Self.blocks(Self.trainingBlocks).map { try store.put($0) }
        #expect(started.wait(timeout: .now() + 60) == .success)
        let closed = Mutex(false)
        let closing = DispatchGroup()
        closing.enter()
        Thread {
            defer { closing.leave() }
            do { try store.close() } catch { Issue.record("close: \(error)") }
            closed.withLock { $0 = true }
        }.start()
        // The close cannot finish while the training is held (this is no timing: it would be wrong at any wait).
        Thread.sleep(forTimeInterval: 0.05)
        #expect(!closed.withLock { $0 })
        gate.signal()
        closing.wait()
        let trained = try #require(store.local.smallBlobs.current)
        let directory = try FileManager.default.contentsOfDirectory(atPath: dir.store.path)
        #expect(directory.contains("small-blobs.dict") && !directory.contains("small-blobs.dict.tmp"), "\(directory)")

        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        #expect(reopened.local.smallBlobs.current?.digest == trained.digest)
        for (digest, block) in zip(digests, Self.blocks(Self.trainingBlocks)) { #expect(try reopened.get(digest) == block) }
        try reopened.close()
    }

    /// Two stores completing their samples at once, from threads of their own, each train on their
    /// own background work: each installs and saves its own dictionary (trained on its own blobs),
    /// and neither's close waits for, or writes into, the other.
    @Test func twoStoresTrainTheirOwnDictionaries() throws {
        let directories = [TemporaryDirectory(), TemporaryDirectory()]
        let stores = try directories.map { try Store(at: $0.store, configuration: Self.configuration()) }
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for (index, store) in stores.enumerated() {
            group.enter()
            Thread {
                defer { group.leave() }
                do { try Self.putTrainingSample(Self.blocks(Self.trainingBlocks, from: UInt64(100 * index)), into: store) } catch {
                    failures.withLock { $0.append("store \(index): \(error)") }
                }
            }.start()
        }
        group.wait()
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let trained = try stores.map { try #require($0.local.smallBlobs.current) }
        #expect(trained[0].digest != trained[1].digest)
        for store in stores { try store.close() }
        for (directory, dictionary) in zip(directories, trained) {
            let file = try FileSystem(io: SystemFileIO()).open(directory.store.appendingPathComponent("small-blobs.dict").path, flags: O_RDONLY)
            #expect(try ChunkDictionary.readVerified(from: file, at: 0, limits: Store.Limits()).header.digest == dictionary.digest)
        }
    }
}
