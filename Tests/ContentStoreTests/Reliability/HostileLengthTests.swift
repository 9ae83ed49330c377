import Foundation
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// Every length and count a file states is checked against the bytes that can follow it (or a
    /// limit) before anything is allocated for it. Here each field of the WAL and checkpoint
    /// encodings claims billions in a file whose checksums are intact (a forgery): the result is
    /// `corrupted`, not an allocation. The fuzz targets explore the same decoders at random; these
    /// pin the extreme values. (Pack entries: `EngineRegressionTests`' forged index tests.)
    @Suite("Reliability: hostile lengths", .blocking)
    struct HostileLengthTests {
        /// A field of a log record or checkpoint body claiming the most its width can say.
        enum Claim: String, CaseIterable, Sendable {
            case changeCount, keyLength, valueLength, referenceCount, placementCount, dropCount
        }

        /// A WAL record payload (kind, bytes) in which `claim` is the maximum, followed by a few bytes.
        static func logRecord(_ claim: Claim) -> (kind: LogRecord.Kind, payload: [UInt8]) {
            var writer = ByteWriter()
            let kind: LogRecord.Kind
            switch claim {
            case .changeCount, .keyLength, .valueLength, .referenceCount:
                kind = .commit
                writer.append(UInt64(1))  // sequence
                writer.append(UInt32(0))  // time
                writer.append(claim == .changeCount ? UInt32.max : 1)
                writer.append(UInt8(1))  // set
                if claim == .keyLength { writer.append(UInt32.max) } else { writer.appendLengthPrefixed("k".utf8) }
                if claim == .valueLength { writer.append(UInt32.max) } else { writer.appendLengthPrefixed([UInt8]()) }
                writer.append(claim == .referenceCount ? UInt32.max : 0)
            case .placementCount:
                kind = .blobs
                writer.append(UInt32.max)
            case .dropCount:
                kind = .drop
                writer.append(UInt32(0))  // time
                writer.append(UInt32.max)
            }
            writer.append(contentsOf: [UInt8](repeating: 0, count: 64))
            return (kind, writer.bytes)
        }

        @Test(arguments: Claim.allCases)
        func aLogRecordClaimingBillionsIsCorruption(_ claim: Claim) throws {
            let (kind, payload) = Self.logRecord(claim)
            #expect(throws: LogRecord.Malformed.self) {
                try payload.withUnsafeBytes { try LogRecord.decode(kind: kind.rawValue, payload: $0, limits: Store.Limits()) }
            }
            // In a segment, checksums intact: corruption even in the last segment (it is no torn write).
            var segment = WALFormat.header(number: 1, salt: 9)
            WALFormat.appendFrame(kind: kind.rawValue, payload: payload, salt: 9, to: &segment)
            let error = #expect(throws: StoreError.self) {
                try segment.withUnsafeBytes {
                    try WALSegmentReader.read($0, path: "segment", expectedNumber: 1, isLast: true, limits: Store.Limits()) { _, _ in }
                }
            }
            #expect(error?.code == .corrupted)
            #expect(error?.offset == UInt64(WALFormat.headerSize))
        }

        /// A WAL frame claiming a 4 GiB payload is a torn tail in the last segment, damage in another.
        @Test(arguments: [true, false])
        func aWALFrameClaimingFourGigabytesIsNeverRead(isLast: Bool) throws {
            var segment = WALFormat.header(number: 1, salt: 9)
            var frame = ByteWriter()
            frame.append(UInt32.max)
            frame.append(UInt32(0))
            frame.append(LogRecord.Kind.commit.rawValue)
            segment += frame.bytes + [UInt8](repeating: 1, count: 100)
            let read = {
                try segment.withUnsafeBytes {
                    try WALSegmentReader.read($0, path: "segment", expectedNumber: 1, isLast: isLast, limits: Store.Limits()) { _, _ in }
                }
            }
            if isLast {
                #expect(try read().validLength == WALFormat.headerSize)
            } else {
                #expect(throws: StoreError.self) { try read() }
            }
        }

        /// A checkpoint file (checksums intact) holding `body`.
        static func checkpoint(body: [UInt8]) -> [UInt8] {
            var file = ByteWriter()
            file.append(contentsOf: Checkpoint.magic)
            file.append(Checkpoint.versionWithoutSeed)  // version 1: the body starts with the blob count
            file.append(UInt32(0))
            file.append(UInt64(1))  // first segment
            file.append(UInt64(0))  // commit sequence
            file.append(UInt32(0))
            file.append(CRC32C.checksum(file.bytes))
            file.append(UInt32(body.count))
            file.append(CRC32C.mask(CRC32C.checksum(body)))
            file.append(contentsOf: body)
            file.append(UInt32(0))
            file.append(CRC32C.mask(withUnsafeBytes(of: UInt64(body.count).littleEndian) { CRC32C.checksum($0) }))
            file.append(UInt64(body.count))
            return file.bytes
        }

        enum CheckpointClaim: String, CaseIterable, Sendable {
            case blobCount, recordCount, keyLength, valueLength, referenceCount, chunkedBlobCount
        }

        /// A checkpoint body holding one record "k", in which `claim` (if any) is the maximum; with
        /// a claim, a few bytes follow.
        static func checkpointBody(_ claim: CheckpointClaim?) -> [UInt8] {
            var body = ByteWriter()
            body.append(claim == .blobCount ? UInt64.max : 0)
            body.append(claim == .recordCount ? UInt64.max : 1)
            if claim == .keyLength { body.append(UInt32.max) } else { body.appendLengthPrefixed("k".utf8) }
            if claim == .valueLength { body.append(UInt32.max) } else { body.appendLengthPrefixed([UInt8]()) }
            body.append(claim == .referenceCount ? UInt32.max : 0)
            body.append(UInt64(0))  // referenced bytes
            body.append(claim == .chunkedBlobCount ? UInt64.max : 0)
            if claim != nil { body.append(contentsOf: [UInt8](repeating: 0, count: 64)) }
            return body.bytes
        }

        func load(_ body: [UInt8]) throws -> Checkpoint.Contents {
            let dir = TemporaryDirectory()
            let path = dir.url.appendingPathComponent(Checkpoint.fileName(1)).path
            try Data(Self.checkpoint(body: body)).write(to: URL(fileURLWithPath: path))
            return try Checkpoint.load(path: path, limits: Store.Limits(), fileSystem: FileSystem(io: SystemFileIO()))
        }

        @Test(arguments: CheckpointClaim.allCases)
        func aCheckpointClaimingBillionsIsCorruption(_ claim: CheckpointClaim) throws {
            let error = #expect(throws: StoreError.self) { try load(Self.checkpointBody(claim)) }
            #expect(error?.code == .corrupted)
            #expect(error?.message.contains("does not parse") == true, "\(String(describing: error))")
        }

        /// The well-formed file the hostile ones are variations of loads (so each test above fails
        /// on its claim, not on the framing).
        @Test func theCheckpointTheClaimsVaryLoads() throws {
            #expect(try load(Self.checkpointBody(nil)).state.records["k"] == Record())
        }
    }
}
