import ContentStore
import Foundation

/// ContentStore's SplitMix64: the same sequence on every platform, so failures reproduce from the seed.
typealias SeededRandom = SplitMix64

extension SplitMix64 {
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
