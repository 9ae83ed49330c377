import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Known answers for the engine's byte coding, which every format (the engine's and the facades')
/// stands on: a change here changes stored bytes.
@Suite(.blocking) struct ByteCodingTests {
    /// Unsigned LEB128, as Docs/warehouse.md gives it: seven bits a byte, least significant first.
    static let varints: [(UInt64, [UInt8])] = [
        (0, [0x00]),
        (1, [0x01]),
        (127, [0x7F]),
        (128, [0x80, 0x01]),
        (300, [0xAC, 0x02]),
        (16_383, [0xFF, 0x7F]),
        (16_384, [0x80, 0x80, 0x01]),
        (UInt64(UInt32.max), [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
    ]

    @Test(arguments: varints)
    func varintKnownAnswers(value: UInt64, encoded: [UInt8]) throws {
        var writer = ByteWriter()
        writer.appendVarint(value)
        #expect(writer.bytes == encoded)
        let (decoded, isAtEnd) = try encoded.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            return (try reader.readVarint(), reader.isAtEnd)
        }
        #expect(decoded == value)
        #expect(isAtEnd)
    }

    @Test func varintPrefixedBytes() {
        var writer = ByteWriter()
        writer.appendVarintPrefixed(Array(repeating: UInt8(0x61), count: 130))
        #expect(Array(writer.bytes.prefix(3)) == [0x82, 0x01, 0x61])
        #expect(writer.count == 132)
    }

    /// A varint cut short is out of bounds; one past 64 bits overflows, whatever follows it.
    static let malformed: [([UInt8], Bool)] = [
        ([], false),
        ([0x80], false),
        ([0xFF, 0xFF], false),
        ([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02], true),
        ([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x00], true),
        ([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], true),
    ]

    @Test(arguments: malformed)
    func malformedVarints(encoded: [UInt8], overflows: Bool) {
        let thrown = encoded.withUnsafeBytes { raw -> (any Error)? in
            var reader = ByteReader(raw)
            do {
                _ = try reader.readVarint()
                return nil
            } catch {
                return error
            }
        }
        #expect(overflows ? thrown is ByteReader.VarintOverflow : thrown is ByteReader.OutOfBounds)
    }

    /// The fixed-width coding beside it: little-endian whatever the host.
    @Test func fixedWidthIsLittleEndian() throws {
        var writer = ByteWriter()
        writer.append(UInt32(0x0102_0304))
        writer.appendLengthPrefixed([0xAA])
        #expect(writer.bytes == [0x04, 0x03, 0x02, 0x01, 0x01, 0x00, 0x00, 0x00, 0xAA])
        let (word, prefixed, isAtEnd) = try writer.bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            return (try reader.read(UInt32.self), Array(try reader.readLengthPrefixed(limit: 1)), reader.isAtEnd)
        }
        #expect(word == 0x0102_0304)
        #expect(prefixed == [0xAA])
        #expect(isAtEnd)
    }
}
