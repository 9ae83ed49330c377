/// Content-defined chunking with FastCDC (Xia et al., USENIX ATC 2016; IEEE TPDS 2020).
///
/// A cut is placed after byte `i` when the gear hash of the bytes ending at `i` has its top `k` bits
/// clear. The gear hash is `h = (h << 1) + gear[byte]`, so after 64 bytes every older byte has been
/// shifted out: the decision depends only on the 64 bytes ending at the candidate, which is what makes
/// boundaries re-synchronise shortly after an edit. On top of that:
/// - **Cut-point skipping**: no cut before `minimumSize`, so those bytes are not tested (only the
///   last 63 of them are hashed, to fill the window of the first candidate).
/// - **Normalized chunking, level 2**: up to `averageSize` the mask has `log2(average) + 2` bits
///   (a cut is 4x less likely), beyond it `log2(average) - 2` bits (4x more likely), which narrows
///   the size distribution around the average and so makes an edit rewrite less data.
/// - A cut is forced at `maximumSize`.
///
/// The masks use the top bits of the hash because those mix the whole 64-byte window; low bits
/// depend on the last few bytes only.
///
/// Boundaries are a pure function of the bytes and the parameters: the same input gives the same
/// chunks whether it is presented whole or streamed in pieces of any size. They also depend on
/// ``GearTable`` and on every rule above, so changing either stops new data from deduplicating
/// against stored data. `Docs/chunking.md` has the exact rules, the measurements behind
/// ``ChunkingParameters/default`` and the known-answer vector.
package struct Chunker: Sendable {
    /// The parameters this chunker was made with (always valid).
    let parameters: ChunkingParameters

    private let minimumSize: Int
    private let averageSize: Int
    private let maximumSize: Int
    /// Mask tested for chunk lengths up to `averageSize` (more bits: harder to match).
    private let strictMask: UInt64
    /// Mask tested for chunk lengths above `averageSize` (fewer bits: easier to match).
    private let looseMask: UInt64
    /// Held here so the hot loop does not go through the lazy global initializer each call.
    private let gear: [UInt64]

    /// The gear window: bytes older than this have been shifted out of the 64-bit hash.
    static let windowSize = 64

    /// Makes a chunker for parameters already validated. Passing parameters that fail
    /// ``ChunkingParameters/validate()`` is a programming error and traps; values that come from a
    /// user go through ``init(validating:)`` instead.
    package init(_ parameters: ChunkingParameters) {
        precondition(parameters.isValid, "invalid chunking parameters \(parameters); validate them first")
        self.parameters = parameters
        minimumSize = parameters.minimumSize
        averageSize = parameters.averageSize
        maximumSize = parameters.maximumSize
        let bits = parameters.averageSize.trailingZeroBitCount
        strictMask = Self.topBitsMask(bits + 2)
        looseMask = Self.topBitsMask(bits - 2)
        gear = GearTable.values
    }

    /// Makes a chunker, throwing instead of trapping when the parameters are invalid.
    init(validating parameters: ChunkingParameters) throws(ChunkingParameters.ValidationError) {
        try parameters.validate()
        self.init(parameters)
    }

    /// A mask of the `count` most significant bits.
    static func topBitsMask(_ count: Int) -> UInt64 {
        ~UInt64(0) &<< UInt64(64 - count)
    }

    /// Length of the chunk that starts at the beginning of `bytes`.
    ///
    /// - Returns: the chunk length, or nil when `bytes` is empty, or when no boundary was found,
    ///   `bytes.count < maximumSize` and `isFinal` is false (the caller must supply more data).
    ///   When `isFinal` is true the remainder (possibly shorter than `minimumSize`) is the last chunk.
    ///
    /// The answer never changes when more bytes are appended, so a streaming caller can feed any
    /// amount; feeding at least `maximumSize` bytes (except at the end) avoids re-scanning.
    package func nextChunkLength(in bytes: UnsafeRawBufferPointer, isFinal: Bool) -> Int? {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return nil }
        if count < minimumSize { return isFinal ? count : nil }
        let limit = Swift.min(count, maximumSize)
        if let cut = findCut(base, limit: limit) { return cut }
        if limit == maximumSize { return maximumSize }
        return isFinal ? count : nil
    }

    /// All chunk lengths of a whole buffer, in order; they sum to `bytes.count`.
    func chunkLengths(of bytes: UnsafeRawBufferPointer) -> [Int] {
        var lengths: [Int] = []
        lengths.reserveCapacity(bytes.count / averageSize + 1)
        var offset = 0
        while offset < bytes.count,
              let length = nextChunkLength(in: UnsafeRawBufferPointer(rebasing: bytes[offset...]), isFinal: true) {
            lengths.append(length)
            offset += length
        }
        return lengths
    }

    /// The first cut length in `minimumSize...limit` chosen by the content, or nil.
    /// Requires `minimumSize <= limit <= maximumSize`.
    /// Bytes are read with raw loads rather than through a typed `UInt8` pointer because the
    /// caller's memory may be bound to another type.
    @inline(__always)
    private func findCut(_ bytes: UnsafeRawPointer, limit: Int) -> Int? {
        gear.withUnsafeBufferPointer { gearBuffer -> Int? in
            let gear = gearBuffer.baseAddress!
            var hash: UInt64 = 0
            // Index of the last byte of the shortest allowed chunk: the first candidate.
            let firstCandidate = minimumSize - 1
            var index = Swift.max(0, minimumSize - Self.windowSize)
            // Fill the window of the first candidate without testing: no cut is allowed here.
            while index < firstCandidate {
                hash = (hash &<< 1) &+ gear[Int(bytes.load(fromByteOffset: index, as: UInt8.self))]
                index &+= 1
            }
            // Lengths up to the average (index < averageSize) use the strict mask.
            if let cut = Self.scan(bytes, gear, from: &index, to: Swift.min(averageSize, limit),
                                   hash: &hash, mask: strictMask) {
                return cut
            }
            return Self.scan(bytes, gear, from: &index, to: limit, hash: &hash, mask: looseMask)
        }
    }

    /// Rolls the hash over bytes `index..<end` and returns the chunk length (position + 1) at the
    /// first byte after which the hash has all `mask` bits clear, or nil when none does; `index` and
    /// `hash` are left where the scan stopped so a second scan can continue with another mask.
    ///
    /// Two bytes per iteration, to shorten the loop-carried dependency: with `t` the gear values,
    /// `h[i+2] = 4·h[i] + (2·t[i+1] + t[i+2])`, where the parenthesised term does not depend on the
    /// hash, so the chain is one shift and one add per two bytes instead of per byte; `h[i+1]` is
    /// computed beside it from `h[i]` only for its test. Same values as the one-byte recurrence
    /// (wrapping arithmetic is exact modulo 2^64), so boundaries do not depend on this choice.
    @inline(__always)
    private static func scan(
        _ bytes: UnsafeRawPointer, _ gear: UnsafePointer<UInt64>,
        from index: inout Int, to end: Int, hash: inout UInt64, mask: UInt64
    ) -> Int? {
        var i = index
        var h = hash
        defer {
            index = i
            hash = h
        }
        while i &+ 1 < end {
            let first = gear[Int(bytes.load(fromByteOffset: i, as: UInt8.self))]
            let second = gear[Int(bytes.load(fromByteOffset: i &+ 1, as: UInt8.self))]
            let middle = (h &<< 1) &+ first
            h = (h &<< 2) &+ ((first &<< 1) &+ second)
            if middle & mask == 0 {
                h = middle
                i &+= 1
                return i
            }
            i &+= 2
            if h & mask == 0 { return i }
        }
        if i < end {
            h = (h &<< 1) &+ gear[Int(bytes.load(fromByteOffset: i, as: UInt8.self))]
            i &+= 1
            if h & mask == 0 { return i }
        }
        return nil
    }
}
