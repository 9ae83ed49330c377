import Foundation

/// A small, fast, seedable generator (xoshiro256**), so every corpus and every access pattern is the
/// same from run to run and from contender to contender.
public struct DeterministicRandom: RandomNumberGenerator, Sendable {
    private var s0, s1, s2, s3: UInt64

    public init(seed: UInt64) {
        // SplitMix64 spreads the seed over the four words (never all zero).
        var x = seed
        func next() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = next(); s1 = next(); s2 = next(); s3 = next()
    }

    @inline(__always)
    public mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3 << 45 | s3 >> 19
        return result
    }

    /// A uniform integer in `0 ..< bound` (bound > 0), by multiply-shift.
    @inline(__always)
    public mutating func below(_ bound: Int) -> Int {
        Int(truncatingIfNeeded: next().multipliedFullWidth(by: UInt64(bound)).high)
    }

    /// A uniform double in [0, 1).
    @inline(__always)
    public mutating func unit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A size drawn log-uniformly from `range`: many small, some large, as real files are.
    public mutating func logUniform(_ range: ClosedRange<Int>) -> Int {
        let low = log(Double(range.lowerBound)), high = log(Double(range.upperBound))
        return min(range.upperBound, max(range.lowerBound, Int(exp(low + (high - low) * unit()))))
    }

    /// Fills `buffer` with random bytes (incompressible).
    public mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset + 8 <= buffer.count {
            buffer.storeBytes(of: next(), toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        if offset < buffer.count {
            var last = next()
            while offset < buffer.count {
                buffer[offset] = UInt8(truncatingIfNeeded: last)
                last >>= 8
                offset += 1
            }
        }
    }
}
