/// SplitMix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014;
/// the constants are those of Vigna's reference `splitmix64.c`).
///
/// The chunker uses it for one thing: generating the gear table from a fixed seed, so the table is
/// reproducible from a few lines of code in any language instead of being an opaque literal. The
/// package's tests, crash workload and demo also use it (package access) for deterministic inputs. Changing anything here changes every chunk
/// boundary ever computed, so stored data would stop deduplicating against new data.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private(set) var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }
}
