import Foundation
import Testing
@testable import ContentStore
import TestThreads

@Suite(.blocking) struct DigestTests {
    static let vectors: [(input: [UInt8], hex: String)] = [
        ([], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        // 1 MiB of the pattern (i * 31) % 251.
        ((0 ..< (1 << 20)).map { UInt8($0 * 31 % 251) }, "3617860390ce98fe34c1bb89382ea7122d3b6890069e30a078892492ba0c774d"),
    ]

    @Test(arguments: 0 ..< vectors.count)
    func knownAnswers(index: Int) {
        let (input, hex) = Self.vectors[index]
        #expect(Digest.sha256(input).hex == hex)
        #expect(Digest.sha256(Data(input)).hex == hex)
        #expect(input.withUnsafeBytes { Digest.sha256($0) }.hex == hex)
    }

    @Test func incrementalHashingMatchesOneShot() {
        let input = (0 ..< 100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var hasher = SHA256.Hasher()
        for start in stride(from: 0, to: input.count, by: 4093) {
            input[start ..< min(start + 4093, input.count)].withUnsafeBytes { hasher.update($0) }
        }
        #expect(hasher.finalize() == Digest.sha256(input))
    }

    /// The one-shot hash (no EVP context) against the incremental one (EVP), at every length across
    /// the padding's boundaries (55, 56, 64 bytes and their multiples of the block).
    @Test func oneShotHashingMatchesIncrementalAtEveryLengthAcrossBlocks() {
        let input = (0 ..< 200).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
        for count in 0 ... input.count {
            var hasher = SHA256.Hasher()
            input[..<count].withUnsafeBytes { hasher.update($0) }
            let incremental = hasher.finalize()
            #expect(Digest.sha256(Array(input[..<count])) == incremental, "length \(count)")
        }
    }

    @Test func hexRoundTripAndParsing() throws {
        let digest = Digest.sha256(Array("abc".utf8))
        #expect(Digest(hex: digest.hex) == digest)
        #expect(Digest(hex: digest.hex.uppercased()) == digest)
        #expect(Digest(digest.description) == digest)
        #expect(Digest(hex: String(digest.hex.dropLast())) == nil)
        #expect(Digest(hex: digest.hex + "0") == nil)
        #expect(Digest(hex: "g" + digest.hex.dropFirst()) == nil)
        #expect(Digest(hex: "") == nil)
        let json = try JSONEncoder().encode([digest])
        #expect(String(decoding: json, as: UTF8.self) == "[\"\(digest.hex)\"]")
        #expect(try JSONDecoder().decode([Digest].self, from: json) == [digest])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Digest].self, from: Data("[\"xyz\"]".utf8)) }
    }

    @Test func orderingFollowsBytes() {
        let digests = (0 ..< 200).map { Digest.sha256([UInt8(truncatingIfNeeded: $0), UInt8($0 / 256)]) }
        #expect(digests.sorted().map(\.hex) == digests.map(\.hex).sorted())
    }

    @Test func crc32cKnownAnswers() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum((0 ..< 32).map { UInt8($0) }) == 0x46DD_794E)
        // Extending in pieces equals one pass.
        let bytes = Array("123456789".utf8)
        #expect(CRC32C.checksum(Array(bytes[4...]), extending: CRC32C.checksum(Array(bytes[..<4]))) == 0xE306_9283)
    }
}
