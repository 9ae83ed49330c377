/// The 256-entry gear table of the FastCDC rolling hash: one pseudo-random 64-bit value per byte value.
///
/// Origin: entry `i` is the `i+1`-th output of ``SplitMix64`` seeded with
/// ``GearTable/seed`` = `0x4353_4765_6172_3031` (the ASCII bytes of `"CSGear01"`, big-endian).
/// So `values[0] == 0x00F8_E3AB_85F4_39A3` (pinned by a test, documented in `Docs/chunking.md`).
///
/// The table is part of the on-disk format in all but name: it decides every chunk boundary, and
/// boundaries decide which chunks deduplicate. It must never change for an existing store.
/// It is generated once per process rather than committed as a 256-line literal because the
/// generator is the documentation: anyone can recompute it, and a test pins a digest of it.
enum GearTable {
    /// The generator seed: `"CSGear01"` in ASCII, read as a big-endian integer.
    static let seed: UInt64 = 0x4353_4765_6172_3031

    /// The 256 gear values, indexed by byte value.
    static let values: [UInt64] = {
        var generator = SplitMix64(seed: seed)
        return (0..<256).map { _ in generator.next() }
    }()
}
