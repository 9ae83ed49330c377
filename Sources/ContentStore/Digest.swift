import Foundation

/// The SHA-256 of a blob's uncompressed bytes: the blob's identity.
///
/// Ordering is lexicographic over the 32 bytes, the same as ordering by ``hex``.
public struct Digest: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    package static let byteCount = 32

    // Four big-endian words: comparing them in order compares the bytes lexicographically.
    private var w0, w1, w2, w3: UInt64

    package init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == Digest.byteCount)
        w0 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        w1 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        w2 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        w3 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }

    /// The SHA-256 of `data`, computed by OpenSSL (EVP, SHA extensions where the CPU has them).
    public static func sha256(_ data: Data) -> Digest {
        data.withUnsafeBytes { SHA256.hash($0) }
    }

    /// The SHA-256 of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> Digest {
        bytes.withUnsafeBytes { SHA256.hash($0) }
    }

    /// The SHA-256 of the bytes in `buffer`.
    public static func sha256(_ buffer: UnsafeRawBufferPointer) -> Digest {
        SHA256.hash(buffer)
    }

    /// Parses 64 hexadecimal digits (either case); nil for anything else.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64 else { return nil }
        var words: [UInt64] = [0, 0, 0, 0]
        for (i, char) in utf8.enumerated() {
            let nibble: UInt8
            switch char {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): nibble = char - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): nibble = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): nibble = char - UInt8(ascii: "A") + 10
            default: return nil
            }
            words[i / 16] = words[i / 16] << 4 | UInt64(nibble)
        }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
    }

    /// Same as ``init(hex:)``.
    public init?(_ description: String) { self.init(hex: description) }

    /// 64 lowercase hexadecimal digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 64)
        for (w, word) in [w0, w1, w2, w3].enumerated() {
            for i in 0 ..< 16 {
                out[w * 16 + i] = digits[Int((word >> UInt64(60 - 4 * i)) & 0xF)]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The same as ``hex``.
    public var description: String { hex }

    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)) { try body($0) }
    }

    public static func < (lhs: Digest, rhs: Digest) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }

    /// One word suffices: SHA-256 output is uniform, and `Hasher` is seeded per process, so
    /// crafted digests cannot flood a table.
    public func hash(into hasher: inout Hasher) { hasher.combine(w1) }

    /// The word `hash(into:)` uses, for ``DigestTable`` to mix with its own secret seed.
    var hashSeedWord: UInt64 { w1 }

    public static func == (lhs: Digest, rhs: Digest) -> Bool {
        lhs.w0 == rhs.w0 && lhs.w1 == rhs.w1 && lhs.w2 == rhs.w2 && lhs.w3 == rhs.w3
    }

    /// Decodes from a hex string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let digest = Digest(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a SHA-256 hex digest: \(text)")
        }
        self = digest
    }

    /// Encodes as a hex string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}
