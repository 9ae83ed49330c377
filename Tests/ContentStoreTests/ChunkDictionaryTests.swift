import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// Chunks compressed with a zstd dictionary kept in their pack (Docs/chunking.md#dictionaries).
@Suite(.blocking) struct ChunkDictionaryTests {
    /// The small chunks of LargeBlobTests: a dictionary is trained on 128 KiB of new chunks.
    static func configuration(clock: TestClock? = nil) -> Store.Configuration {
        LargeBlobTests.configuration(clock: clock)
    }

    /// Prose-like bytes: words from a vocabulary of a few thousand, skewed, so zstd compresses the
    /// whole well and small chunks alone less well (what a dictionary recovers).
    static func text(_ count: Int, seed: UInt64) -> Data {
        var random = SeededRandom(seed: seed)
        let letters = Array("etaoinshrdlucmfwypvbgkjqxz".utf8)
        let vocabulary = (0 ..< 3000).map { _ in
            (0 ..< 2 + Int(random.next() % 8)).map { _ in letters[Int(random.next() % 26) * Int(random.next() % 26) / 26] }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 16)
        while bytes.count < count {
            let skewed = Int(random.next() % 3000) * Int(random.next() % 3000) / 3000
            bytes.append(contentsOf: vocabulary[skewed])
            bytes.append(random.next() % 12 == 0 ? 0x0A : 0x20)
        }
        return Data(bytes.prefix(count))
    }

    /// The entries of every pack of a store, in file order.
    static func packEntries(_ store: URL) throws -> [(path: String, offset: UInt64, header: PackFormat.EntryHeader, payload: [UInt8])] {
        let fileSystem = FileSystem(io: SystemFileIO())
        let directory = store.appendingPathComponent("packs").path
        var result: [(String, UInt64, PackFormat.EntryHeader, [UInt8])] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() {
            let file = try fileSystem.open(directory + "/" + name, flags: O_RDONLY)
            for (offset, header) in try PackReader.entries(of: file) {
                let payload = try file.readExactly(Int(header.storedLength), at: offset + UInt64(PackFormat.entryHeaderSize))
                result.append((file.path, offset, header, payload))
            }
        }
        return result
    }

    static func dictionaryReference(_ payload: [UInt8]) -> UInt64 {
        payload.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self).littleEndian }
    }

    /// Every entry that uses a dictionary names the one dictionary entry of its own pack.
    static func expectOneDictionaryPerPackUsedByItsEntries(_ store: URL) throws -> Int {
        let entries = try packEntries(store)
        var used = 0
        for path in Set(entries.map(\.path)) {
            let inPack = entries.filter { $0.path == path }
            let dictionaries = inPack.filter { $0.header.isDictionary }
            let users = inPack.filter { $0.header.usesDictionary }
            #expect(dictionaries.count == (users.isEmpty ? 0 : 1), "\(path): \(dictionaries.count) dictionaries, \(users.count) users")
            for user in users {
                #expect(Self.dictionaryReference(user.payload) == dictionaries.first?.offset)
                #expect(user.header.isCompressed && user.offset > dictionaries[0].offset)
            }
            used += users.count
        }
        return used
    }

    @Test(arguments: [1 << 20, 4 << 20])
    func textChunksAreCompressedWithTheirPacksDictionary(size: Int) throws {
        let dir = TemporaryDirectory()
        let data = Self.text(size, seed: UInt64(size))
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        #expect(try store.get(digest) == data)
        try store.close()

        let users = try Self.expectOneDictionaryPerPackUsedByItsEntries(dir.store)
        let chunks = try Self.packEntries(dir.store).filter { !$0.header.isManifest && !$0.header.isDictionary }
        // Most chunks gain from the dictionary; each kept only what was smaller.
        #expect(users * 2 > chunks.count, "\(users) of \(chunks.count) chunks use the dictionary")

        // Read back by a new process: the dictionary comes from the pack.
        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        #expect(try reopened.get(digest) == data)
        let exported = dir.url.appendingPathComponent("out")
        try reopened.export(digest, to: exported)
        #expect(try Data(contentsOf: exported) == data)
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// A dictionary costs less than it saves: the chunks and their dictionary take less room than
    /// the same chunks compressed one by one.
    @Test func theDictionaryPaysForItself() throws {
        let data = Self.text(2 << 20, seed: 3)
        let config = Self.configuration()
        let lengths = try data.withUnsafeBytes { try config.chunking.chunkLengths(of: $0) }
        var alone = 0
        var offset = 0
        data.withUnsafeBytes { raw in
            for length in lengths {
                let chunk = UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + length])
                alone += PackFormat.entryHeaderSize + (Zstd.compress(chunk, level: config.compressionLevel)?.count ?? length)
                offset += length
            }
        }
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: config)
        try store.put(data)
        try store.close()
        let stored = try Self.packEntries(dir.store).filter { !$0.header.isManifest }.reduce(0) { $0 + Int($1.header.totalLength) }
        #expect(Double(stored) < 0.95 * Double(alone), "\(stored) bytes with the dictionary, \(alone) without")
    }

    @Test func incompressibleChunksGetNoDictionary() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 11)
        let data = random.bytes(2 << 20)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        try store.close()
        let entries = try Self.packEntries(dir.store)
        #expect(!entries.contains { $0.header.isDictionary || $0.header.usesDictionary })
        let reopened = try Store(at: dir.store, configuration: Self.configuration())
        #expect(try reopened.get(digest) == data)
        try reopened.close()
    }

    /// Later content the pack's dictionary does not fit (text of another vocabulary) is
    /// compressed without it, and takes no more room than its chunks compressed one by one.
    @Test func aDictionaryIsNotUsedForContentItDoesNotFit() throws {
        let dir = TemporaryDirectory()
        let config = Self.configuration()
        let store = try Store(at: dir.store, configuration: config)
        try store.put(Self.text(1 << 20, seed: 8))
        let usedBefore = try Self.packEntries(dir.store).filter(\.header.usesDictionary).count
        #expect(usedBefore > 0)
        let unrelated = Self.text(1 << 20, seed: 9)
        let digest = try store.put(unrelated)
        #expect(try store.get(digest) == unrelated)
        try store.close()

        let entries = try Self.packEntries(dir.store)
        #expect(entries.filter(\.header.usesDictionary).count == usedBefore, "the unrelated text's chunks use no dictionary")
        let lengths = try unrelated.withUnsafeBytes { try config.chunking.chunkLengths(of: $0) }
        var alone = 0
        var offset = 0
        var digests = Set<Digest>()
        unrelated.withUnsafeBytes { raw in
            for length in lengths {
                let chunk = UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + length])
                if digests.insert(Digest.sha256(Data(chunk))).inserted {
                    alone += Zstd.compress(chunk, level: config.compressionLevel)?.count ?? length
                }
                offset += length
            }
        }
        let stored = entries.filter { digests.contains($0.header.digest) }.reduce(0) { $0 + Int($1.header.storedLength) }
        #expect(stored == alone, "\(stored) bytes stored, \(alone) compressed alone")
    }

    /// Content whose first batch a trained dictionary makes no smaller (digits in random order:
    /// nothing repeats for a dictionary to hold) stores no dictionary, and neither does the rest.
    @Test func aDictionaryThatDoesNotPayIsNotStored() throws {
        let dir = TemporaryDirectory()
        var random = SeededRandom(seed: 12)
        let digits = Data((0 ..< (2 << 20)).map { _ in UInt8(ascii: "0") + UInt8(random.next() % 10) })
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(digits)
        #expect(try store.get(digest) == digits)
        try store.close()
        let entries = try Self.packEntries(dir.store)
        #expect(entries.contains { $0.header.isCompressed }, "the digits compress")
        #expect(!entries.contains { $0.header.isDictionary || $0.header.usesDictionary })
    }

    /// A batch whose sampled chunks do not compress is stored raw without compressing the rest;
    /// text after random bytes in the same batch is still sampled, and every chunk of it compressed.
    @Test(arguments: [0, 256 << 10])
    func textAfterRandomBytesIsCompressed(randomPrefix: Int) throws {
        let dir = TemporaryDirectory()
        let config = Self.configuration()
        var random = SeededRandom(seed: 13)
        let data = random.bytes(randomPrefix) + Self.text(1 << 20, seed: 14)
        let store = try Store(at: dir.store, configuration: config)
        let digest = try store.put(data)
        #expect(try store.get(digest) == data)
        try store.close()

        let lengths = try data.withUnsafeBytes { try config.chunking.chunkLengths(of: $0) }
        var textChunks = Set<Digest>()
        var randomChunks = Set<Digest>()
        var offset = 0
        for length in lengths {
            let chunk = Digest.sha256(data[offset ..< offset + length])
            if offset >= randomPrefix { textChunks.insert(chunk) } else if offset + length <= randomPrefix { randomChunks.insert(chunk) }
            offset += length
        }
        let entries = try Self.packEntries(dir.store)
        let stored = Dictionary(entries.map { ($0.header.digest, $0.header) }, uniquingKeysWith: { first, _ in first })
        #expect(textChunks.allSatisfy { stored[$0]?.isCompressed == true })
        #expect(randomChunks.allSatisfy { stored[$0]?.isCompressed == false })
    }

    /// Concurrent puts into a pack with no decision yet train one dictionary between them: while one
    /// trains, the others' batches are compressed without one.
    @Test func concurrentPutsIntoAnUndecidedPackTrainOneDictionary() throws {
        let dir = TemporaryDirectory()
        let texts = (0 ..< 4).map { Self.text(1 << 20, seed: 40 + UInt64($0)) }
        // The first put to train waits until a second one trains too, which code that lets two
        // puts train for one pack does whatever the scheduling, or until every other put is done.
        let puts = Mutex((training: 0, finished: 0))
        let configuration = Self.configuration()
        var seams = Store.Seams()
        seams.beforeTrainingDictionary = {
            puts.withLock { $0.training += 1 }
            #expect(waitUntil(timeout: 60) { puts.withLock { $0.training > 1 || $0.finished == texts.count - 1 } })
        }
        let store = try Store(at: dir.store, configuration: configuration, seams: seams)
        let failures = Mutex<[String]>([])
        // Threads of their own, all running at once, since one of them waits for the others.
        let group = DispatchGroup()
        for (thread, text) in texts.enumerated() {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let digest = try store.put(text)
                    puts.withLock { $0.finished += 1 }
                    if try store.get(digest) != text { failures.withLock { $0.append("text \(thread) reads back wrong") } }
                } catch {
                    failures.withLock { $0.append("text \(thread): \(error)") }
                }
            }.start()
        }
        group.wait()
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        try store.close()
        let entries = try Self.packEntries(dir.store)
        #expect(Set(entries.map(\.path)).count == 1)
        #expect(entries.filter(\.header.isDictionary).count == 1)
        #expect(try Self.expectOneDictionaryPerPackUsedByItsEntries(dir.store) > 0)
    }

    /// A small edit's few new chunks train no dictionary of their own in a new pack.
    @Test func aSmallEditInANewPackTrainsNone() throws {
        let dir = TemporaryDirectory()
        var data = Self.text(1 << 20, seed: 5)
        var store = try Store(at: dir.store, configuration: Self.configuration())
        try store.put(data)
        try store.close()
        data.replaceSubrange(500_000 ..< 504_096, with: Self.text(4096, seed: 6))
        store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        #expect(try store.get(digest) == data)
        try store.close()
        let dictionaries = try Self.packEntries(dir.store).filter(\.header.isDictionary)
        #expect(dictionaries.count == 1)
    }

    /// One flipped bit in the dictionary: every read of a chunk that uses it fails with `corrupted`
    /// naming the pack and the dictionary's offset, and never returns wrong bytes.
    @Test(arguments: [false, true], [PackFormat.entryHeaderSize + 100, 20])
    func aDamagedDictionaryIsCorruptedNeverWrongBytes(verifiesReads: Bool, flippedByte: Int) throws {
        let dir = TemporaryDirectory()
        let data = Self.text(1 << 20, seed: 7)
        let store = try Store(at: dir.store, configuration: Self.configuration())
        let digest = try store.put(data)
        try store.close()
        let dictionary = try #require(try Self.packEntries(dir.store).first { $0.header.isDictionary })
        try flipBit(in: URL(fileURLWithPath: dictionary.path), at: Int(dictionary.offset) + flippedByte, bit: 3)

        var configuration = Self.configuration()
        configuration.verifiesReads = verifiesReads
        let reopened = try Store(at: dir.store, configuration: configuration)
        let error = try #require(throws: StoreError.self) { try reopened.get(digest) }
        #expect(error.code == .corrupted)
        #expect(error.path == dictionary.path && error.offset == dictionary.offset, "\(error.message)")
        #expect(error.message.contains("dictionary at offset \(dictionary.offset)"), "\(error.message)")
        #expect(throws: StoreError.code(.corrupted)) { try reopened.export(digest, to: dir.url.appendingPathComponent("out")) }
        let report = try reopened.verify(VerificationOptions(readData: true))
        #expect(report.problems.contains { $0.digest == digest && $0.message.contains("dictionary") }, "\(report.problems)")
        try reopened.close()
    }

    /// Collection rewrites a pack whose chunks use its dictionary: the live chunks move with one
    /// copy of the dictionary into the new pack, byte for byte the same frames, and read back.
    @Test func collectionMovesTheDictionaryWithTheChunksThatUseIt() throws {
        let dir = TemporaryDirectory()
        let clock = TestClock()
        // One text, so the kept half fits the dictionary trained on the dropped half.
        let text = Self.text(2 << 20, seed: 8)
        let dropped = text.prefix(1 << 20)
        let kept = text.suffix(1 << 20)
        var store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        try store.put(dropped)
        let digest = try store.put(kept)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "kept") }
        try store.close()
        let before = try Self.packEntries(dir.store)
        let framesBefore = Set(before.filter(\.header.usesDictionary).map { $0.payload.dropFirst(PackFormat.dictionaryReferenceSize) })

        clock.advance(by: 7200)
        store = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        options.packRewriteThreshold = 0.2
        let report = try store.collectGarbage(options)
        #expect(report.packsRewritten == 1, "\(report)")
        #expect(try store.get(digest) == kept)
        try store.close()

        let after = try Self.packEntries(dir.store)
        #expect(!after.contains { before.map(\.path).contains($0.path) }, "the old pack is gone")
        #expect(try Self.expectOneDictionaryPerPackUsedByItsEntries(dir.store) > 0)
        #expect(after.filter(\.header.isDictionary).map(\.header.digest) == before.filter(\.header.isDictionary).map(\.header.digest))
        let framesAfter = Set(after.filter(\.header.usesDictionary).map { $0.payload.dropFirst(PackFormat.dictionaryReferenceSize) })
        #expect(framesAfter.isSubset(of: framesBefore))

        let reopened = try Store(at: dir.store, configuration: Self.configuration(clock: clock))
        #expect(try reopened.get(digest) == kept)
        #expect(try reopened.verify(VerificationOptions(readData: true)).isClean)
        try reopened.close()
    }

    /// Hostile references: an entry naming itself, the pack header, an entry that is no dictionary,
    /// or a dictionary claiming a gigabyte is `corrupted`, refused before anything that size is
    /// allocated, never a trap.
    @Test(arguments: ["self", "header", "blob", "huge"])
    func forgedDictionaryReferencesAreCorrupted(forgery: String) throws {
        let dir = TemporaryDirectory()
        let file = try FileSystem(io: SystemFileIO()).open(dir.url.appendingPathComponent("00000001.pack").path, flags: O_RDWR | O_CREAT)
        let plain = Array("plain blob".utf8)
        let plainEntry = plain.withUnsafeBytes {
            PackFormat.entryHeader(digest: Digest.sha256(Data(plain)), compressed: false, rawLength: 10, payload: $0, time: 0)
        } + plain
        let hugeDictionary = PackFormat.entryHeader(digest: Digest.sha256(Data(plain)), flags: PackFormat.dictionaryFlag | PackFormat.compressedFlag,
                                                    rawLength: 1 << 30, payload: plain.withUnsafeBytes { [$0] }, time: 0) + plain
        let prefix = PackFormat.headerSize + plainEntry.count
        var pack = PackFormat.header(id: 1, createdMilliseconds: 0) + plainEntry + hugeDictionary
        let offset = UInt64(pack.count)
        let reference: UInt64 = switch forgery {
        case "self": offset
        case "header": 0
        case "blob": UInt64(PackFormat.headerSize)
        default: UInt64(prefix)
        }
        let frame = try #require(Zstd.compress(Array(repeating: 0x41, count: 1000).withUnsafeBytes { $0 }, level: 3))
        let digest = Digest.sha256(Data(repeating: 0x41, count: 1000))
        let (header, referencePrefix) = frame.withUnsafeBytes {
            PackFormat.dictionaryCompressedEntry(digest: digest, rawLength: 1000, dictionaryOffset: reference, frame: $0, time: 0)
        }
        let entry = header + referencePrefix + frame
        pack += entry
        try file.write(pack, at: 0)
        let expected = PackReader.ExpectedEntry(digest: digest, rawLength: 1000, storedLength: UInt32(entry.count - PackFormat.entryHeaderSize), compressed: true)
        let error = try #require(throws: StoreError.self) {
            try entry.withUnsafeBytes {
                try PackReader.decodeEntry($0, expected: expected, verify: true, limits: .init(), path: file.path, offset: offset) {
                    try ChunkDictionary.read(from: file, at: $0, limits: .init())
                }
            }
        }
        #expect(error.code == .corrupted, "\(error)")
        #expect(error.path == file.path, "\(error)")
    }
}
