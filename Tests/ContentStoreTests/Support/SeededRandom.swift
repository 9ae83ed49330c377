import Foundation

/// SplitMix64: small, fast, and the same sequence on every platform, so failures reproduce from the seed.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        var i = 0
        while i < count {
            var word = next()
            for _ in 0 ..< min(8, count - i) {
                bytes[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        return Data(bytes)
    }

    /// Text-like bytes that zstd compresses well.
    mutating func compressibleBytes(_ count: Int) -> Data {
        let words = ["store", "blob", "record", "commit", "digest", "pack", "log", "the", "a", "of", "\n"]
        var text = ""
        text.reserveCapacity(count + 16)
        while text.utf8.count < count { text += words[Int(next() % UInt64(words.count))] + " " }
        return Data(text.utf8.prefix(count))
    }
}
