import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Known-answer vectors for the on-disk format, computed independently (a Python script implementing
/// Docs/on-disk-format.md). A change here is a format change: bump the version and migrate.
@Suite(.blocking) struct FormatTests {
    static let hello = Digest.sha256(Data("hello".utf8))

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0 ..< $0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test func formatFile() {
        #expect(hex(FormatFile.encoded()) == "4353544f524500000100000000000000645ceae1")
    }

    @Test func packEntryHeader() {
        let header = Array("hello".utf8).withUnsafeBytes {
            PackFormat.entryHeader(digest: Self.hello, compressed: false, rawLength: 5, payload: $0, time: 1_800_000_000)
        }
        #expect(hex(header) == "43534245000000002cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824050000000500000000d2496b5cce7d42")
        let parsed = try? header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) }
        #expect(parsed == PackFormat.EntryHeader(flags: 0, digest: Self.hello, rawLength: 5, storedLength: 5, time: 1_800_000_000, checksum: 0x427D_CE5C))
    }

    /// A pack holding a dictionary (a raw-content one: zstd takes any bytes without its magic as
    /// history) at offset 32 and, after it, a blob compressed with it. The frame was made by the zstd
    /// command (`zstd -3 --no-check --no-dictID -D dict`), not by the store.
    @Test func dictionaryAndAnEntryThatUsesIt() throws {
        let dictionary = Array("hello world, hello store, hello pack, hello chunk. ".utf8)
        let blob = Array("hello store, hello chunk, hello world, hello pack.".utf8)
        let frame = bytes("28b52ffd2032a50000486368756e7061636b2e0300503840a98252a280")
        let dictionaryHeader = PackFormat.entryHeader(digest: Digest.sha256(Data(dictionary)), flags: PackFormat.dictionaryFlag,
                                                      rawLength: 51, payload: dictionary.withUnsafeBytes { [$0] }, time: 1_800_000_000)
        #expect(hex(dictionaryHeader) == "4353424504000000d508821f8039994e7df7ac08e44008787e08f035602ceb91b972c918a4e207b1330000003300000000d2496b9e70c6dc")
        let (header, prefix) = frame.withUnsafeBytes {
            PackFormat.dictionaryCompressedEntry(digest: Digest.sha256(Data(blob)), rawLength: 50, dictionaryOffset: 32, frame: $0, time: 1_800_000_000)
        }
        #expect(hex(header) == "43534245090000003b30e5574457aa6fe6fe9b4fdf027bf6eef3d62c8af9f3b822b173cc14818f22320000002500000000d2496be08cd02c")
        #expect(hex(prefix) == "2000000000000000")
        let parsed = try header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) }
        #expect(parsed.flags == 9 && parsed.isCompressed && parsed.usesDictionary && !parsed.isDictionary && parsed.storedLength == 37)

        // The store decodes it, asking for the dictionary by its offset.
        let dir = TemporaryDirectory()
        let file = try FileSystem(io: SystemFileIO()).open(dir.url.appendingPathComponent("00000001.pack").path, flags: O_RDWR | O_CREAT)
        let pack = PackFormat.header(id: 1, createdMilliseconds: 0) + dictionaryHeader + dictionary + header + prefix + frame
        try file.write(pack, at: 0)
        var asked: [UInt64] = []
        let expected = PackReader.ExpectedEntry(digest: Digest.sha256(Data(blob)), rawLength: 50, storedLength: 37, compressed: true)
        let decoded = try (header + prefix + frame).withUnsafeBytes {
            try PackReader.decodeEntry($0, expected: expected, verify: true, limits: .init(), path: file.path, offset: 139) { offset in
                asked.append(offset)
                return try ChunkDictionary.read(from: file, at: offset, limits: .init())
            }
        }
        #expect(Array(decoded) == blob && asked == [32])
    }

    /// Flag combinations no writer makes do not parse: a dictionary that is a manifest or uses a
    /// dictionary, a dictionary reference without a zstd frame or too short for its offset.
    @Test(arguments: [(UInt8(0x06), 100), (0x0C, 100), (0x0D, 100), (0x08, 100), (0x09, 7), (0x10, 100)])
    func impossibleDictionaryFlagsDoNotParse(flags: UInt8, storedLength: Int) {
        let payload = [UInt8](repeating: 0, count: storedLength)
        let header = PackFormat.entryHeader(digest: Self.hello, flags: flags, rawLength: 1000, payload: payload.withUnsafeBytes { [$0] }, time: 0)
        #expect(throws: PackFormat.Malformed.self) { try header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) } }
    }

    @Test func walSegmentHeaderAndCommitFrame() throws {
        #expect(hex(WALFormat.header(number: 1, salt: 0x0102_0304)) == "435357414c534547010000000403020101000000000000000000000071805207")
        let commit = LogRecord.commit(.init(sequence: 1, time: 1_800_000_000, changes: [
            .init(key: "k", record: Record(value: Data("v".utf8), references: [Self.hello])),
        ]))
        var frame: [UInt8] = []
        WALFormat.appendFrame(kind: commit.kind.rawValue, payload: commit.encoded(), salt: 0x0102_0304, to: &frame)
        #expect(hex(frame) == "3f000000c5f3cc7301010000000000000000d2496b0100000001010000006b0100000076010000002cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        let decoded = try frame.withUnsafeBytes { raw in
            let parsed = try #require(WALFormat.frame(in: raw, at: 0, salt: 0x0102_0304, maximumPayload: 1024))
            return try LogRecord.decode(kind: parsed.kind, payload: parsed.payload, limits: .init())
        }
        #expect(decoded == commit)
        // Another segment's salt does not validate the frame.
        #expect(frame.withUnsafeBytes { WALFormat.frame(in: $0, at: 0, salt: 0x0102_0305, maximumPayload: 1024) } == nil)
    }

    @Test func packBytesFrame() throws {
        let record = LogRecord.packBytes(.init(pack: 2, offset: 32, bytes: Array("hello".utf8)))
        var frame: [UInt8] = []
        WALFormat.appendFrame(kind: record.kind.rawValue, payload: record.encoded(), salt: 0x0102_0304, to: &frame)
        #expect(hex(frame) == "1500000082015f06050200000020000000000000000500000068656c6c6f")
        let decoded = try frame.withUnsafeBytes { raw in
            let parsed = try #require(WALFormat.frame(in: raw, at: 0, salt: 0x0102_0304, maximumPayload: 1024))
            return try LogRecord.decode(kind: parsed.kind, payload: parsed.payload, limits: .init())
        }
        #expect(decoded == record)
    }

    @Test(arguments: [BlobEntry.maximumOffset, UInt64.max])
    func packBytesBeyondAnyPackOffsetAreRefused(offset: UInt64) {
        let record = LogRecord.packBytes(.init(pack: 1, offset: offset, bytes: [1]))
        #expect(throws: LogRecord.Malformed.self) {
            try record.encoded().withUnsafeBytes { try LogRecord.decode(kind: record.kind.rawValue, payload: $0, limits: .init()) }
        }
    }

    @Test(arguments: [
        LogRecord.blobs([.init(digest: hello, location: .init(pack: 3, offset: 4096), compressed: true, rawLength: 10, storedLength: 7, time: 99)]),
        LogRecord.drop(time: 5, digests: [hello, Digest.sha256(Data())]),
        LogRecord.commit(.init(sequence: 9, time: 1, changes: [.init(key: "gone", record: nil), .init(key: "é", record: Record())])),
        LogRecord.packBytes(.init(pack: 7, offset: 1 << 33, bytes: [0, 1, 2, 255])),
    ])
    func logRecordsRoundTrip(record: LogRecord) throws {
        let payload = record.encoded()
        #expect(try payload.withUnsafeBytes { try LogRecord.decode(kind: record.kind.rawValue, payload: $0, limits: .init()) } == record)
        // Every strict prefix is refused, never misread.
        for cut in 0 ..< payload.count {
            #expect(throws: LogRecord.Malformed.self) {
                try Array(payload[..<cut]).withUnsafeBytes { try LogRecord.decode(kind: record.kind.rawValue, payload: $0, limits: .init()) }
            }
        }
    }

    @Test func hugeCountsAreRefusedBeforeAllocating() {
        var writer = ByteWriter()
        writer.append(UInt32.max)  // a drop record claiming 4 billion digests
        #expect(throws: LogRecord.Malformed.self) {
            try ([0, 0, 0, 0] + writer.bytes).withUnsafeBytes { try LogRecord.decode(kind: 3, payload: $0, limits: .init()) }
        }
    }

    @Test func checkpointRoundTrip() throws {
        let dir = TemporaryDirectory()
        var state = StoreState()
        state.apply([.init(digest: Self.hello, location: .init(pack: 1, offset: 32), compressed: false, rawLength: 5, storedLength: 5, time: 7)])
        try state.apply(LogRecord.Commit(sequence: 1, time: 8, changes: [.init(key: "k", record: Record(value: Data("v".utf8), references: [Self.hello]))]))
        try Checkpoint.write(.init(firstSegment: 3, state: state), directory: dir.url.path, fileSystem: FileSystem(io: SystemFileIO()))
        let loaded = try Checkpoint.load(path: dir.url.appendingPathComponent(Checkpoint.fileName(3)).path, limits: .init(), fileSystem: FileSystem(io: SystemFileIO()))
        #expect(loaded.firstSegment == 3)
        #expect(loaded.state.commitSequence == 1)
        #expect(loaded.state.blobs[Self.hello] == state.blobs[Self.hello])
        #expect(loaded.state.records.map(\.key) == ["k"])
        #expect(loaded.state.records["k"] == state.records["k"])
    }

    /// A checkpoint of many records and blobs, of every reference shape, loads back exactly (the
    /// load decodes blobs and records on two threads and builds the record map in one pass).
    @Test func checkpointOfManyEntriesRoundTrips() throws {
        let dir = TemporaryDirectory()
        var state = StoreState()
        let digests = (0 ..< 5_000).map { Digest.sha256(Data("blob \($0)".utf8)) }
        state.apply(digests.enumerated().map { i, digest in
            .init(digest: digest, location: .init(pack: UInt32(i % 7), offset: UInt64(32 + i * 100)), compressed: i % 2 == 0,
                  rawLength: UInt32(i), storedLength: UInt32(i / 2), time: 7)
        })
        var changes: [LogRecord.Change] = []
        for i in 0 ..< 3_000 {
            let references = i % 3 == 0 ? [] : i % 3 == 1 ? [digests[i]] : [digests[i], digests[i + 1], digests[i]]
            changes.append(.init(key: "record \(i)", record: Record(value: Data(repeating: UInt8(i % 251), count: i % 40), references: references)))
        }
        try state.apply(LogRecord.Commit(sequence: 1, time: 8, changes: changes))
        try Checkpoint.write(.init(firstSegment: 2, state: state), directory: dir.url.path, fileSystem: FileSystem(io: SystemFileIO()))
        let loaded = try Checkpoint.load(path: dir.url.appendingPathComponent(Checkpoint.fileName(2)).path, limits: .init(), fileSystem: FileSystem(io: SystemFileIO()))
        loaded.state.records.checkInvariants()
        #expect(Array(loaded.state.records).map(\.key) == Array(state.records).map(\.key))
        #expect(Array(loaded.state.records).map(\.value) == Array(state.records).map(\.value))
        #expect(loaded.state.blobs.count == digests.count)
        // Version 2 saves the index seed: the load restores the same table, slot for slot.
        #expect(loaded.state.blobs.entries.seed == state.blobs.entries.seed)
        #expect(Array(loaded.state.blobs.entries.keys) == Array(state.blobs.entries.keys))
        for digest in digests { #expect(loaded.state.blobs[digest] == state.blobs[digest]) }
        #expect(loaded.state.blobs.unreferenced == state.blobs.unreferenced)
        #expect(loaded.state.blobs.liveBytesByPack == state.blobs.liveBytesByPack)
        #expect(loaded.state.blobs.referencedLogicalBytes == state.blobs.referencedLogicalBytes)
        #expect(loaded.state.blobs.manifestNodeCount == 0)
    }

    /// The index counts its manifest nodes (collection skips looking for them when there are none)
    /// through placing, moving and removing.
    @Test func theIndexCountsManifestNodes() {
        var index = BlobIndex()
        let node = Digest.sha256(Data("node".utf8)), plain = Digest.sha256(Data("plain".utf8))
        index.place(.init(digest: node, location: .init(pack: 1, offset: 32), compressed: false, rawLength: 64, storedLength: 64, time: 1, manifest: true))
        index.place(.init(digest: plain, location: .init(pack: 1, offset: 200), compressed: false, rawLength: 5, storedLength: 5, time: 1))
        #expect(index.manifestNodeCount == 1)
        // Moved by a pack rewrite: still one node.
        index.place(.init(digest: node, location: .init(pack: 2, offset: 32), compressed: false, rawLength: 64, storedLength: 64, time: 1, manifest: true))
        #expect(index.manifestNodeCount == 1)
        index.remove(plain)
        #expect(index.manifestNodeCount == 1)
        index.remove(node)
        #expect(index.manifestNodeCount == 0)
    }

    /// Record keys out of order (checksums intact: a forged or buggy file) are `corrupted`, not a
    /// map that silently breaks its order.
    @Test func checkpointWithKeysOutOfOrderIsCorrupted() throws {
        let dir = TemporaryDirectory()
        var state = StoreState()
        try state.apply(LogRecord.Commit(sequence: 1, time: 8, changes: [
            .init(key: "key-a", record: Record()), .init(key: "key-b", record: Record()),
        ]))
        try Checkpoint.write(.init(firstSegment: 1, state: state), directory: dir.url.path, fileSystem: FileSystem(io: SystemFileIO()))
        let path = dir.url.appendingPathComponent(Checkpoint.fileName(1)).path
        var file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // One frame: its payload starts after the header and the frame's length and checksum.
        let payloadStart = Checkpoint.headerSize + 8
        let payloadLength = Int(file[Checkpoint.headerSize]) | Int(file[Checkpoint.headerSize + 1]) << 8
        let payload = payloadStart ..< payloadStart + payloadLength
        let first = try #require(file[payload].firstRange(of: Array("key-a".utf8)))
        file[first.upperBound - 1] = UInt8(ascii: "c")  // "key-c" before "key-b"
        let crc = CRC32C.mask(CRC32C.checksum(Array(file[payload])))
        withUnsafeBytes(of: crc.littleEndian) { file.replaceSubrange(Checkpoint.headerSize + 4 ..< Checkpoint.headerSize + 8, with: $0) }
        try Data(file).write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: StoreError.self) {
            try Checkpoint.load(path: path, limits: .init(), fileSystem: FileSystem(io: SystemFileIO()))
        }
        #expect(error.code == .corrupted)
        #expect(error.description.contains("ascending"), "\(error)")
    }

    /// The load's UTF-8 check agrees with `String(validating:as:)` on valid keys and on every kind
    /// of invalid sequence, including a truncated one whose replacement is as long as it was.
    @Test(arguments: [
        [], Array("key".utf8), Array("ключ-🔑".utf8), [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xFF], [0xC0, 0x80],
        [0xED, 0xA0, 0x80], Array("a".utf8) + [0x80] + Array("b".utf8), [0xF4, 0x90, 0x80, 0x80],
    ] as [[UInt8]])
    func checkpointKeysAreValidatedAsUTF8(_ bytes: [UInt8]) {
        let fast = bytes.withUnsafeBytes { Checkpoint.validString($0) }
        #expect(fast == String(validating: bytes, as: UTF8.self))
    }
}
