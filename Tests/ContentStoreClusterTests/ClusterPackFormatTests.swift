import ContentStore
import Foundation
import Testing
@testable import ContentStoreCluster

@Suite struct ClusterPackFormatTests {
    typealias Format = ClusterPackFormat

    static func entry(_ seed: UInt8, length: Int, codec: Format.Codec = .raw) -> Format.Entry {
        let stored = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* Int(seed) &+ 1) }
        return Format.Entry(digest: Array(repeating: seed, count: 32), codec: codec, logicalLength: UInt64(length * 2), stored: stored)
    }

    /// The bytes of Docs/cluster.md §2.2, computed independently (Python, bit-wise CRC32C).
    @Test func knownAnswer() {
        var builder = Format.Builder()
        builder.append(Format.Entry(digest: Array(repeating: 0xAA, count: 32), codec: .raw, logicalLength: 3, stored: [1, 2, 3]))
        let pack = builder.finish()
        let expected = "4353424500000000" + String(repeating: "aa", count: 32) + "0300000000000000030000001ef230f1010203"
            + String(repeating: "aa", count: 32) + "000000000000000003000000000000000300000000000000"
            + "4353504b0100000001000000000000003b00000000000000fd3a659e7d486f00"
        #expect(pack.map { String(format: "%02x", $0) }.joined() == expected)
    }

    @Test(arguments: [0, 1, 5, 200])
    func roundTrip(entryCount: Int) throws {
        var builder = Format.Builder()
        var entries: [Format.Entry] = []
        for i in 0..<entryCount {
            let entry = Self.entry(UInt8(i % 250 + 1), length: (i * 37) % 3000, codec: i % 2 == 0 ? .raw : .zstd)
            entries.append(entry)
            builder.append(entry)
        }
        let pack = builder.finish()
        let rows = try Format.parseIndex(pack, objectKey: "packs/ab/x.pack")
        #expect(rows == builder.index)
        for (row, entry) in zip(rows, entries) {
            let slice = Array(pack[Int(row.entryOffset)..<Int(row.entryOffset) + Format.entryHeaderSize + Int(row.storedLength)])
            #expect(try Format.parseEntry(slice, expected: row, objectKey: "packs/ab/x.pack") == entry)
        }
    }

    @Test func damagedEntryIsCorruptedNamingObjectAndOffset() throws {
        var builder = Format.Builder()
        builder.append(Self.entry(1, length: 100))
        let second = builder.append(Self.entry(2, length: 100))
        var pack = builder.finish()
        pack[Int(second.entryOffset) + Format.entryHeaderSize + 10] ^= 0x40
        let slice = Array(pack[Int(second.entryOffset)..<Int(second.entryOffset) + Format.entryHeaderSize + 100])
        let error = #expect(throws: StoreError.self) { try Format.parseEntry(slice, expected: second, objectKey: "packs/cd/y.pack") }
        #expect(error?.code == .corrupted)
        #expect(error?.offset == second.entryOffset)
        #expect(error?.path == "packs/cd/y.pack")
        // A location that does not match the header is damage too (a wrong row, a wrong range).
        var wrong = second
        wrong.logicalLength += 1
        let good = Array(builder.bytes[Int(second.entryOffset)..<Int(second.entryOffset) + Format.entryHeaderSize + 100])
        #expect(throws: StoreError(code: .corrupted, message: "")) { try Format.parseEntry(good, expected: wrong, objectKey: "k") }
        #expect(throws: StoreError(code: .corrupted, message: "")) { try Format.parseEntry(Array(good.dropLast()), expected: second, objectKey: "k") }
    }

    @Test func everyFlippedByteOfIndexOrTrailerIsDetected() throws {
        var builder = Format.Builder()
        for i in 1...3 { builder.append(Self.entry(UInt8(i), length: 10)) }
        let pack = builder.finish()
        let indexStart = pack.count - Format.trailerSize - 3 * Format.indexRowSize
        for position in indexStart..<pack.count {
            var damaged = pack
            damaged[position] ^= 0x01
            #expect(throws: StoreError.self, "byte \(position)") { try Format.parseIndex(damaged, objectKey: "k") }
        }
        #expect(throws: StoreError(code: .corrupted, message: "")) { try Format.parseIndex(Array(pack.suffix(31)), objectKey: "k") }
        #expect(throws: StoreError(code: .corrupted, message: "")) { try Format.parseIndex(Array(pack.dropFirst()), objectKey: "k") }
    }

    @Test func newerFormatVersionIsUnsupported() throws {
        var builder = Format.Builder()
        builder.append(Self.entry(1, length: 4))
        var pack = builder.finish()
        let start = pack.count - Format.trailerSize
        pack[start + 4] = 2
        let crc = CRC32C.checksum(pack[start..<start + Format.trailerCoveredSize])
        withUnsafeBytes(of: crc.littleEndian) { pack.replaceSubrange(start + 28..<start + 32, with: $0) }
        #expect(throws: StoreError(code: .unsupportedFormat, message: "")) { try Format.parseIndex(pack, objectKey: "k") }
    }
}
