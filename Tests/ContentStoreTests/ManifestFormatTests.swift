import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Known-answer vectors for the formats of chunked blobs (Docs/on-disk-format.md), computed
/// independently (a Python script implementing that page).
@Suite(.blocking) struct ManifestFormatTests {
    static let hello = Digest.sha256(Data("hello".utf8))
    static let empty = Digest.sha256(Data())
    static let node = ManifestNode(level: 0, entries: [.init(digest: hello, length: 5), .init(digest: empty, length: 7)])
    static let nodeDigest = Digest(hex: "93511b33d22e09270c25977c4537672a0b150fd0c105ef3ef75f600a84ea0ac8")!

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func manifestNode() throws {
        let encoded = Self.node.encoded()
        #expect(hex(encoded) == "01000000020000000c00000000000000"
            + "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b98240500000000000000"
            + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8550700000000000000")
        #expect(encoded.withUnsafeBytes { ManifestNode.digest(of: $0) } == Self.nodeDigest)
        #expect(try encoded.withUnsafeBytes { try ManifestNode.decode($0) } == Self.node)
        // Every field a writer fills is checked: a wrong total, a zero length, a short node.
        for (offset, value) in [(8, UInt8(13)), (48, UInt8(0)), (1, UInt8(17)), (4, UInt8(3))] {
            var damaged = encoded
            damaged[offset] = value
            #expect(throws: ManifestNode.Malformed.self) { try damaged.withUnsafeBytes { try ManifestNode.decode($0) } }
        }
        #expect(throws: ManifestNode.Malformed.self) { try Array(encoded.dropLast()).withUnsafeBytes { try ManifestNode.decode($0) } }
    }

    static let records: [(LogRecord, String)] = [
        (.manifests([.init(
            placement: .init(digest: nodeDigest, location: .init(pack: 3, offset: 4096), compressed: false, rawLength: 96, storedLength: 96, time: 99, manifest: true),
            logicalSize: nil, children: [hello, empty])]),
         "0100000093511b33d22e09270c25977c4537672a0b150fd0c105ef3ef75f600a84ea0ac803000000001000000000000002600000006000000063000000000000000000000000020000002cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (.manifests([.init(
            placement: .init(digest: hello, location: .init(pack: 1, offset: 32), compressed: true, rawLength: 96, storedLength: 90, time: 7, manifest: true),
            logicalSize: (5 << 32) + 12, children: [nodeDigest])]),
         "010000002cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982401000000200000000000000003600000005a00000007000000010c000000050000000100000093511b33d22e09270c25977c4537672a0b150fd0c105ef3ef75f600a84ea0ac8"),
        (.dropManifests(time: 5, drops: [.init(digest: nodeDigest, children: [hello, empty])]),
         "050000000100000093511b33d22e09270c25977c4537672a0b150fd0c105ef3ef75f600a84ea0ac8020000002cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ]

    @Test(arguments: 0 ..< 3)
    func manifestRecords(index: Int) throws {
        let (record, expected) = Self.records[index]
        let payload = record.encoded()
        #expect(hex(payload) == expected)
        #expect(try payload.withUnsafeBytes { try LogRecord.decode(kind: record.kind.rawValue, payload: $0, limits: .init()) } == record)
        for cut in 0 ..< payload.count {
            #expect(throws: LogRecord.Malformed.self) {
                try Array(payload[..<cut]).withUnsafeBytes { try LogRecord.decode(kind: record.kind.rawValue, payload: $0, limits: .init()) }
            }
        }
    }

    @Test func manifestPackEntryFlag() throws {
        let header = Array("hello".utf8).withUnsafeBytes {
            PackFormat.entryHeader(digest: Self.hello, compressed: false, manifest: true, rawLength: 5, payload: $0, time: 1_800_000_000)
        }
        let parsed = try header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) }
        #expect(parsed.flags == 2 && parsed.isManifest && !parsed.isCompressed)
    }

    /// A checkpoint keeps what the entries cannot give: chunked blob sizes and the referenced bytes.
    @Test func checkpointKeepsManifestSizes() throws {
        let dir = TemporaryDirectory()
        var state = StoreState()
        state.apply([
            .init(digest: Self.empty, location: .init(pack: 1, offset: 32), compressed: false, rawLength: 7, storedLength: 7, time: 7),
            .init(digest: Self.nodeDigest, location: .init(pack: 1, offset: 95), compressed: false, rawLength: 5, storedLength: 5, time: 7),
        ])
        try state.apply([LogRecord.ManifestPlacement(
            placement: .init(digest: Self.hello, location: .init(pack: 1, offset: 200), compressed: false, rawLength: 96, storedLength: 96, time: 7, manifest: true),
            logicalSize: 5 << 32, children: [Self.empty, Self.nodeDigest, Self.empty])])
        try state.apply(LogRecord.Commit(sequence: 1, time: 8, changes: [.init(key: "k", record: Record(references: [Self.hello]))]))
        #expect(state.blobs[Self.empty]?.refCount == 2)
        #expect(state.blobs.referencedLogicalBytes == 5 << 32)
        try Checkpoint.write(.init(firstSegment: 3, state: state), directory: dir.url.path, fileSystem: FileSystem(io: SystemFileIO()))
        let loaded = try Checkpoint.load(path: dir.url.appendingPathComponent(Checkpoint.fileName(3)).path, limits: .init(), fileSystem: FileSystem(io: SystemFileIO()))
        #expect(loaded.state.blobs.manifestSizes == [Self.hello: 5 << 32])
        #expect(loaded.state.blobs.referencedLogicalBytes == 5 << 32)
        #expect(loaded.state.blobs[Self.hello] == state.blobs[Self.hello])
        #expect(loaded.state.blobs[Self.hello]?.isManifest == true)
        #expect(loaded.state.blobs.logicalBytes == 12)
    }
}
