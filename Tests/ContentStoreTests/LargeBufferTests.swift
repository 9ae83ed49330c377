import Foundation
import Testing

@testable import ContentStore
import TestThreads

/// The checkpoint load's body buffer: bytes appended in place, growth, and a fill that throws.
@Suite(.blocking) struct LargeBufferTests {
    struct Refused: Error {}

    @Test func appendsInPlaceAndGrowsKeepingTheBytes() throws {
        let buffer = try LargeBuffer(reservingCapacity: 10, path: "test")
        var expected: [UInt8] = []
        // 3 MiB in chunks of 100 KiB: past the first 2 MiB mapping, so it grows at least once.
        for chunk in 0 ..< 31 {
            let bytes = (0 ..< 100 << 10).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ chunk) }
            try buffer.append(bytes.count, path: "test") { $0.copyBytes(from: bytes) }
            expected += bytes
        }
        #expect(buffer.count == expected.count)
        #expect(buffer.withUnsafeBytes { Array($0) } == expected)
    }

    @Test func aFillThatThrowsAppendsNothing() throws {
        let buffer = try LargeBuffer(reservingCapacity: 1 << 20, path: "test")
        try buffer.append(4, path: "test") { $0.copyBytes(from: [1, 2, 3, 4]) }
        #expect(throws: Refused.self) {
            try buffer.append(4 << 20, path: "test") { _ in throw Refused() }
        }
        #expect(buffer.count == 4)
        try buffer.append(2, path: "test") { $0.copyBytes(from: [5, 6]) }
        #expect(buffer.withUnsafeBytes { Array($0) } == [1, 2, 3, 4, 5, 6])
    }

    @Test func anEmptyAppendCallsNothing() throws {
        let buffer = try LargeBuffer(reservingCapacity: 0, path: "test")
        try buffer.append(0, path: "test") { _ in throw Refused() }
        #expect(buffer.count == 0)
    }
}
