import Testing
@testable import ContentStore
import TestThreads

/// Deterministic test inputs: SplitMix64 outputs written little-endian, so the bytes are the same on
/// every platform and can be regenerated from the seed (see `Docs/chunking.md`).
private func generatedBytes(count: Int, seed: UInt64) -> [UInt8] {
    var generator = SplitMix64(seed: seed)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 8)
    while bytes.count < count {
        let value = generator.next()
        for shift in stride(from: 0, to: 64, by: 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
    bytes.removeLast(bytes.count - count)
    return bytes
}

/// Low-entropy but not constant input: lines drawn from a small vocabulary, so the chunker sees
/// compressible, repetitive content (the case where a weak hash would stop cutting).
private func textBytes(count: Int, seed: UInt64) -> [UInt8] {
    let words = ["the", "store", "chunk", "boundary", "of", "and", "a", "record", "blob", "version",
                 "edit", "manifest", "is", "to", "digest", "pack"].map { Array($0.utf8) }
    var generator = SplitMix64(seed: seed)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 16)
    while bytes.count < count {
        bytes += words[Int(generator.next() % UInt64(words.count))]
        bytes.append(generator.next() % 9 == 0 ? 10 : 32)
    }
    bytes.removeLast(bytes.count - count)
    return bytes
}

private func lengths(_ chunker: Chunker, _ bytes: [UInt8]) -> [Int] {
    bytes.withUnsafeBytes { chunker.chunkLengths(of: $0) }
}

/// Start offsets paired with lengths, for comparing chunkings position by position.
private func spans(_ lengths: [Int]) -> [(offset: Int, length: Int)] {
    var offset = 0
    return lengths.map { length in
        defer { offset += length }
        return (offset, length)
    }
}

/// The chunking rule written from its definition, independent of the optimized rolling loop:
/// a chunk of length L (min ≤ L ≤ max) ends where the gear hash of the 64 bytes ending at byte L−1,
/// Σ gear[b[L−1−k]] << k, has its top log2(avg)+2 bits clear (L ≤ avg) or top log2(avg)−2 bits
/// clear (L > avg); the first such L wins, else max; the remainder of the input is the last chunk.
private func referenceLengths(_ bytes: [UInt8], _ parameters: ChunkingParameters) -> [Int] {
    let bits = parameters.averageSize.trailingZeroBitCount
    let gear = GearTable.values
    var result: [Int] = []
    var start = 0
    while start < bytes.count {
        let remaining = bytes.count - start
        var chunk = min(remaining, parameters.maximumSize)
        if remaining > parameters.minimumSize {
            for length in parameters.minimumSize...chunk {
                let end = start + length - 1
                var hash: UInt64 = 0
                for k in 0..<64 where end - k >= start {
                    hash &+= gear[Int(bytes[end - k])] &<< UInt64(k)
                }
                let maskBits = length <= parameters.averageSize ? bits + 2 : bits - 2
                if hash >> UInt64(64 - maskBits) == 0 {
                    chunk = length
                    break
                }
            }
        }
        result.append(chunk)
        start += chunk
    }
    return result
}

private let smallParameters = ChunkingParameters(minimumSize: 64, averageSize: 256, maximumSize: 1024)
/// An odd minimum and a maximum close to the average, so forced cuts at the maximum happen often.
private let tightParameters = ChunkingParameters(minimumSize: 1000, averageSize: 4096, maximumSize: 5000)
private let largeParameters = ChunkingParameters(minimumSize: 4096, averageSize: 16384, maximumSize: 65536)

@Suite("Chunker", .blocking)
struct ChunkerTests {
    // MARK: Determinism of the building blocks

    @Test func splitMix64MatchesReferenceOutputs() {
        // Outputs of Vigna's splitmix64.c for seed 0.
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(generator.next() == 0x06C4_5D18_8009_454F)
    }

    @Test func gearTableIsTheDocumentedOne() {
        let table = GearTable.values
        #expect(GearTable.seed == 0x4353_4765_6172_3031)
        #expect(table.count == 256)
        #expect(table[0] == 0x00F8_E3AB_85F4_39A3)
        #expect(table[255] == 0x2B25_76BF_BA97_5FCF)
        // A fold over every entry, so a change anywhere in the table is caught.
        let fold = table.reduce(UInt64(0)) { ($0 &* 0x100_0000_01B3) ^ $1 }
        #expect(fold == 0xE100_ACAF_2C3D_AE9E)
        #expect(Set(table).count == 256)
    }

    // MARK: Known answer

    /// Chunk lengths of 1 MiB of `generatedBytes(seed: 0x4B41_5431)` ("KAT1") with the default
    /// parameters. A change here means every stored chunk stops deduplicating against new data:
    /// update it only together with a format version bump, and `Docs/chunking.md`.
    @Test func knownAnswerWithDefaultParameters() {
        let input = generatedBytes(count: 1 << 20, seed: 0x4B41_5431)
        let expected: [Int] = Self.knownAnswer
        let actual = lengths(Chunker(.default), input)
        #expect(actual == expected)
        #expect(actual.reduce(0, +) == 1 << 20)
    }

    /// 111 chunks, mean 9447 B.
    static let knownAnswer: [Int] = [
        10854, 10201,  9239,  2710, 13692, 12344,  8333, 12789, 14915,  6181,  5894, 12360,
         8932,  9971,  6282, 10275, 13185,  8299, 13779,  8347,  8738,  9474,  9284,  8848,
         8294,  9720,  9730, 10115, 10556,  8998,  8807,  8719,  9073, 10336, 10329,  9732,
         9553, 14882,  2570,  9908,  9255, 10104,  8941, 12296,  8796,  2493,  8501,  5493,
        11693, 10257,  8537, 14916, 10011,  8854, 10398, 10034,  2710,  4414,  8312,  8207,
         9445, 10619, 10360,  8897,  3919, 10135,  2287,  8824,  8603, 10502,  8225, 15361,
        10282, 12271, 14560,  4283, 18447,  6004,  2771,  9164, 13148, 10610,  8407,  2632,
        11016, 11887,  8602,  8320,  9848,  9434, 10230, 12298,  7646, 13013,  8476, 10292,
         8156,  9030,  8843,  8863,  9977, 10634, 10057, 14955,  9114, 12606,  9899,  9775,
         7162, 11965,  6252,
    ]

    @Test(arguments: [ChunkingParameters.default, smallParameters, tightParameters])
    func matchesTheDefinition(parameters: ChunkingParameters) {
        let chunker = Chunker(parameters)
        for (index, input) in [
            generatedBytes(count: 150_000, seed: 11),
            textBytes(count: 150_000, seed: 12),
            generatedBytes(count: parameters.maximumSize * 3 + 1, seed: 13),
        ].enumerated() {
            #expect(lengths(chunker, input) == referenceLengths(input, parameters), "input \(index)")
        }
    }

    /// A cut exactly at the minimum is decided by the full 64-byte window ending there, and by
    /// nothing before it. Random inputs almost never exercise this one candidate (probability
    /// 2^-15 per chunk by default), so windows that do and do not match are searched for here.
    @Test(arguments: [smallParameters, ChunkingParameters.default])
    func aCutAtTheMinimumSeesExactlyTheWindow(parameters: ChunkingParameters) {
        let chunker = Chunker(parameters)
        let strictBits = UInt64(parameters.averageSize.trailingZeroBitCount + 2)
        let gear = GearTable.values
        var matching = 0, nearMisses = 0
        var seed: UInt64 = 0
        while matching < 3 || nearMisses < 3 {
            seed += 1
            let window = generatedBytes(count: 64, seed: seed)
            var full: UInt64 = 0, withoutOldest: UInt64 = 0
            for k in 0..<64 {
                let term = gear[Int(window[63 - k])] &<< UInt64(k)
                full &+= term
                if k < 63 { withoutOldest &+= term }
            }
            let fullMatches = full >> (64 - strictBits) == 0
            let shorterMatches = withoutOldest >> (64 - strictBits) == 0
            guard fullMatches || shorterMatches else { continue }
            // Anything before the window must not matter: use both zeros and other bytes there.
            for prefixSeed in [nil, seed &+ 1_000_000] as [UInt64?] {
                let prefix = prefixSeed.map { generatedBytes(count: parameters.minimumSize - 64, seed: $0) }
                    ?? [UInt8](repeating: 0, count: parameters.minimumSize - 64)
                let input = prefix + window + [UInt8](repeating: 0, count: parameters.maximumSize)
                let length = input.withUnsafeBytes { chunker.nextChunkLength(in: $0, isFinal: true) }
                #expect((length == parameters.minimumSize) == fullMatches, "seed \(seed)")
            }
            if fullMatches { matching += 1 } else { nearMisses += 1 }
        }
    }

    // MARK: Stability

    @Test(arguments: [(ChunkingParameters.default, UInt64(1)), (.default, UInt64(2)), (smallParameters, UInt64(3)),
                      (tightParameters, UInt64(4)), (largeParameters, UInt64(5))])
    func streamingGivesTheSameBoundaries(parameters: ChunkingParameters, seed: UInt64) {
        let chunker = Chunker(parameters)
        let input = seed.isMultiple(of: 2) ? textBytes(count: 1 << 20, seed: seed) : generatedBytes(count: 1 << 20, seed: seed)
        let whole = lengths(chunker, input)

        // Feed pieces of random sizes, from 1 byte to twice the maximum, as a reader would.
        var pieceSizes = SplitMix64(seed: seed &+ 100)
        var streamed: [Int] = []
        var buffer: [UInt8] = []
        var fed = 0
        while true {
            let isFinal = fed == input.count
            let length = buffer.withUnsafeBytes { chunker.nextChunkLength(in: $0, isFinal: isFinal) }
            if let length {
                #expect(length > 0 && length <= buffer.count)
                streamed.append(length)
                buffer.removeFirst(length)
            } else if isFinal {
                break
            } else {
                let piece = min(1 + Int(pieceSizes.next() % UInt64(2 * parameters.maximumSize)), input.count - fed)
                buffer += input[fed..<fed + piece]
                fed += piece
            }
        }
        #expect(buffer.isEmpty)
        #expect(streamed == whole)
    }

    @Test(arguments: [ChunkingParameters.default, smallParameters, tightParameters, largeParameters])
    func everyChunkRespectsTheBounds(parameters: ChunkingParameters) {
        let chunker = Chunker(parameters)
        let inputs: [[UInt8]] = [
            generatedBytes(count: 3 << 20, seed: 21),
            textBytes(count: 1 << 20, seed: 22),
            [UInt8](repeating: 0, count: 1 << 20),                       // never cuts: all maximum
            (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) },  // periodic
        ]
        for (index, input) in inputs.enumerated() {
            let result = lengths(chunker, input)
            #expect(result.reduce(0, +) == input.count, "input \(index)")
            for length in result.dropLast() {
                #expect(length >= parameters.minimumSize && length <= parameters.maximumSize, "input \(index)")
            }
            if let last = result.last {
                #expect(last >= 1 && last <= parameters.maximumSize, "input \(index)")
            }
        }
        // Content with entropy cuts on content, not at the maximum.
        let random = lengths(chunker, inputs[0])
        let mean = Double(inputs[0].count) / Double(random.count)
        #expect(mean > Double(parameters.averageSize) * 0.75 && mean < Double(parameters.averageSize) * 1.6)
    }

    @Test func overwriteChangesOnlyNearbyChunks() {
        let parameters = ChunkingParameters.default
        let chunker = Chunker(parameters)
        let original = generatedBytes(count: 8 << 20, seed: 31)
        var edited = original
        let editStart = 4 << 20 + 1234
        let editEnd = editStart + 4096
        edited.replaceSubrange(editStart..<editEnd, with: generatedBytes(count: 4096, seed: 32))

        let before = lengths(chunker, original)
        let after = lengths(chunker, edited)
        // Multiset difference of the lengths: what the edit added and removed.
        var counts: [Int: Int] = [:]
        for length in before { counts[length, default: 0] += 1 }
        var added = 0
        for length in after {
            if let count = counts[length], count > 0 { counts[length] = count - 1 } else { added += 1 }
        }
        let removed = counts.values.reduce(0, +)
        #expect(added <= 3 && removed <= 3, "added \(added), removed \(removed)")

        // Far from the edit (more than two maximum chunks away) the chunks are the very same spans.
        let margin = 2 * parameters.maximumSize
        let farBefore = { (span: (offset: Int, length: Int)) in span.offset + span.length <= editStart - margin }
        let farAfter = { (span: (offset: Int, length: Int)) in span.offset >= editEnd + margin }
        let oldSpans = spans(before), newSpans = spans(after)
        #expect(oldSpans.filter(farBefore).map(\.length) == newSpans.filter(farBefore).map(\.length))
        #expect(oldSpans.filter(farAfter).map(\.offset) == newSpans.filter(farAfter).map(\.offset))
        #expect(oldSpans.filter(farAfter).map(\.length) == newSpans.filter(farAfter).map(\.length))
        #expect(!oldSpans.filter(farAfter).isEmpty)
    }

    @Test(arguments: [1, 100, 4096, -1, -4096])
    func insertionResynchronizes(delta: Int) {
        // Boundaries after an insertion or deletion shift with the content and then coincide again.
        let parameters = ChunkingParameters.default
        let chunker = Chunker(parameters)
        let original = generatedBytes(count: 4 << 20, seed: 41)
        var edited = original
        let position = 2 << 20 + 777
        if delta > 0 {
            edited.insert(contentsOf: generatedBytes(count: delta, seed: 42), at: position)
        } else {
            edited.removeSubrange(position..<position - delta)
        }
        let oldSpans = spans(lengths(chunker, original))
        let newSpans = spans(lengths(chunker, edited))
        let margin = 2 * parameters.maximumSize
        let oldTail = oldSpans.filter { $0.offset >= position + margin }
        let newTail = newSpans.filter { $0.offset >= position + delta + margin }
        #expect(!oldTail.isEmpty)
        #expect(oldTail.map(\.length) == newTail.map(\.length))
        #expect(oldTail.map { $0.offset + delta } == newTail.map(\.offset))
        let oldHead = oldSpans.filter { $0.offset + $0.length <= position }
        #expect(oldHead.map(\.length) == Array(newSpans.prefix(oldHead.count).map(\.length)))
    }

    // MARK: Sizes at the bounds

    @Test(arguments: [0, 1,
                      ChunkingParameters.default.minimumSize - 1, ChunkingParameters.default.minimumSize,
                      ChunkingParameters.default.averageSize,
                      ChunkingParameters.default.maximumSize, ChunkingParameters.default.maximumSize + 1,
                      1_000_000])
    func sizesAroundTheBounds(size: Int) {
        let parameters = ChunkingParameters.default
        let chunker = Chunker(parameters)
        let random = lengths(chunker, generatedBytes(count: size, seed: UInt64(size) &+ 50))
        #expect(random.reduce(0, +) == size)
        #expect(random.dropLast().allSatisfy { $0 >= parameters.minimumSize && $0 <= parameters.maximumSize })
        #expect(random.allSatisfy { $0 >= 1 && $0 <= parameters.maximumSize })
        if size == 0 { #expect(random.isEmpty) }
        if size > 0 && size <= parameters.minimumSize { #expect(random == [size]) }
        if size > parameters.maximumSize { #expect(random.count >= 2) }

        // Zeros never match a mask, so the cuts are exactly the forced ones.
        let zeros = lengths(chunker, [UInt8](repeating: 0, count: size))
        let full = size / parameters.maximumSize, rest = size % parameters.maximumSize
        #expect(zeros == Array(repeating: parameters.maximumSize, count: full) + (rest > 0 ? [rest] : []))
    }

    @Test func nextChunkLengthAsksForMoreDataOnlyWhenItMust() {
        let parameters = ChunkingParameters.default
        let chunker = Chunker(parameters)
        func next(_ bytes: [UInt8], final: Bool) -> Int? {
            bytes.withUnsafeBytes { chunker.nextChunkLength(in: $0, isFinal: final) }
        }
        let zeros = { (count: Int) in [UInt8](repeating: 0, count: count) }
        #expect(next([], final: false) == nil)
        #expect(next([], final: true) == nil)
        #expect(next(zeros(1), final: false) == nil)
        #expect(next(zeros(1), final: true) == 1)
        #expect(next(zeros(parameters.minimumSize - 1), final: false) == nil)
        #expect(next(zeros(parameters.minimumSize - 1), final: true) == parameters.minimumSize - 1)
        #expect(next(zeros(parameters.maximumSize - 1), final: false) == nil)
        #expect(next(zeros(parameters.maximumSize - 1), final: true) == parameters.maximumSize - 1)
        #expect(next(zeros(parameters.maximumSize), final: false) == parameters.maximumSize)
        #expect(next(zeros(parameters.maximumSize + 1), final: false) == parameters.maximumSize)

        // A content cut is reported without the rest of the data once the bytes up to it are present.
        let input = generatedBytes(count: 200_000, seed: 61)
        let first = lengths(chunker, input)[0]
        #expect(first < parameters.maximumSize)
        #expect(next(Array(input[..<first]), final: false) == first)
        #expect(next(Array(input[..<(first - 1)]), final: false) == nil)
    }

    // MARK: Parameters

    @Test func defaultParametersAreValid() throws {
        try ChunkingParameters.default.validate()
        #expect(ChunkingParameters.default.isValid)
        #expect(throws: Never.self) { _ = try Chunker(validating: .default) }
    }

    @Test(arguments: [
        (ChunkingParameters(minimumSize: 2048, averageSize: 8000, maximumSize: 65536),
         ChunkingParameters.ValidationError.averageSizeNotPowerOfTwo(8000)),
        (.init(minimumSize: 2048, averageSize: 0, maximumSize: 65536), .averageSizeNotPowerOfTwo(0)),
        (.init(minimumSize: 2048, averageSize: -8192, maximumSize: 65536), .averageSizeNotPowerOfTwo(-8192)),
        (.init(minimumSize: 2048, averageSize: Int.min, maximumSize: 65536), .averageSizeNotPowerOfTwo(Int.min)),
        (.init(minimumSize: 64, averageSize: 128, maximumSize: 1024), .averageSizeOutOfRange(128)),
        (.init(minimumSize: 2048, averageSize: 1 << 62, maximumSize: Int.max), .averageSizeOutOfRange(1 << 62)),
        (.init(minimumSize: 8192, averageSize: 8192, maximumSize: 65536),
         .minimumNotBelowAverage(minimum: 8192, average: 8192)),
        (.init(minimumSize: Int.max, averageSize: 8192, maximumSize: 65536),
         .minimumNotBelowAverage(minimum: Int.max, average: 8192)),
        (.init(minimumSize: 2048, averageSize: 8192, maximumSize: 8192),
         .maximumNotAboveAverage(average: 8192, maximum: 8192)),
        (.init(minimumSize: 2048, averageSize: 8192, maximumSize: Int.min),
         .maximumNotAboveAverage(average: 8192, maximum: Int.min)),
        (.init(minimumSize: 2048, averageSize: 8192, maximumSize: Int.max), .maximumSizeTooLarge(Int.max)),
        (.init(minimumSize: 63, averageSize: 8192, maximumSize: 65536), .minimumSizeTooSmall(63)),
        (.init(minimumSize: -1, averageSize: 8192, maximumSize: 65536), .minimumSizeTooSmall(-1)),
        (.init(minimumSize: 0, averageSize: 0, maximumSize: 0), .minimumSizeTooSmall(0)),
    ])
    func invalidParametersAreRejected(parameters: ChunkingParameters, error: ChunkingParameters.ValidationError) {
        #expect(throws: error) { try parameters.validate() }
        #expect(!parameters.isValid)
        #expect(throws: error) { _ = try Chunker(validating: parameters) }
        #expect(!error.description.isEmpty)
    }

    @Test(arguments: [smallParameters, tightParameters, largeParameters,
                      ChunkingParameters(minimumSize: 64, averageSize: 16 << 20, maximumSize: 64 << 20)])
    func boundaryParametersAreAccepted(parameters: ChunkingParameters) throws {
        try parameters.validate()
        let chunker = try Chunker(validating: parameters)
        #expect(chunker.parameters == parameters)
    }
}
