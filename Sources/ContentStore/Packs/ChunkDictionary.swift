import Foundation
import Synchronization

/// A zstd dictionary that entries of a pack are compressed with: chunks (one trained per pack,
/// Docs/chunking.md#dictionaries) and small whole blobs (one trained per open store,
/// ``SmallBlobDictionary``). Readers cannot tell the two apart, and need not.
///
/// It lives in the pack as an entry of its own (``PackFormat/dictionaryFlag``), written before the
/// first entry there that uses it; each such entry names it by its offset. The dictionary thus
/// lives exactly as long as the pack, and a pack rewrite copies it along with the entries that
/// need it: no index entry or reference count tracks it.
final class ChunkDictionary: Sendable {
    /// SHA-256 of the dictionary's bytes: its entry's digest.
    let digest: Digest
    /// Its pack entry, header and payload. Nothing in it depends on where it lands, so the same
    /// bytes are written into every pack that needs the dictionary.
    let entry: [UInt8]
    let decompressor: Zstd.DecompressionDictionary
    /// For a dictionary this process trained; nil for one read back from a pack.
    let compressor: Zstd.CompressionDictionary?

    private init(digest: Digest, entry: [UInt8], decompressor: Zstd.DecompressionDictionary, compressor: Zstd.CompressionDictionary?) {
        self.digest = digest
        self.entry = entry
        self.decompressor = decompressor
        self.compressor = compressor
    }

    /// A dictionary for compressing chunks at `level` or, with `smallInputs`, inputs of at most its
    /// `size` bytes with its `minimumMatch` and raw literals (``Zstd/CompressionDictionary/init(_:level:smallInputs:minimumMatch:)``);
    /// nil when zstd cannot load `bytes`.
    convenience init?(trained bytes: [UInt8], level: Int, time: UInt32, smallInputs: (size: Int, minimumMatch: Int)? = nil) {
        let compressor = smallInputs.map { Zstd.CompressionDictionary(bytes, level: level, smallInputs: $0.size, minimumMatch: $0.minimumMatch) }
            ?? Zstd.CompressionDictionary(bytes, level: level)
        guard bytes.count <= PackFormat.maximumDictionarySize,
              let compressor,
              let decompressor = bytes.withUnsafeBytes({ Zstd.DecompressionDictionary($0) })
        else { return nil }
        let digest = Digest.sha256(bytes)
        let entry = bytes.withUnsafeBytes { raw in
            let frame = Zstd.compress(raw, level: level)
            return frame.map { frame in
                frame.withUnsafeBytes { PackFormat.entryHeader(digest: digest, flags: PackFormat.dictionaryFlag | PackFormat.compressedFlag,
                                                               rawLength: UInt32(raw.count), payload: [$0], time: time) } + frame
            } ?? PackFormat.entryHeader(digest: digest, flags: PackFormat.dictionaryFlag, rawLength: UInt32(raw.count), payload: [raw], time: time) + bytes
        }
        self.init(digest: digest, entry: entry, decompressor: decompressor, compressor: compressor)
    }

    /// The dictionary whose entry starts at `offset` of `file`, checked like a blob read with
    /// verification (lengths, then the SHA-256 of its bytes).
    ///
    /// - Throws: `corrupted` naming the pack and the dictionary's offset when the entry is not an
    ///   intact dictionary.
    static func read(from file: File, at offset: UInt64, limits: Store.Limits) throws -> ChunkDictionary {
        let (parsed, entry, bytes) = try readVerified(from: file, at: offset, limits: limits)
        guard let decompressor = bytes.withUnsafeBytes({ Zstd.DecompressionDictionary($0) }) else {
            throw StoreError.corrupted("zstd cannot load the dictionary at offset \(offset) of \(file.path)", path: file.path, offset: offset)
        }
        return ChunkDictionary(digest: parsed.digest, entry: entry, decompressor: decompressor, compressor: nil)
    }

    /// The dictionary entry at `offset` of `file`, checked as ``read(from:at:limits:)`` describes:
    /// its header, its bytes as stored, and the dictionary's bytes.
    static func readVerified(from file: File, at offset: UInt64, limits: Store.Limits) throws
        -> (header: PackFormat.EntryHeader, entry: [UInt8], bytes: Data) {
        do {
            let header = try file.readExactly(PackFormat.entryHeaderSize, at: offset)
            let parsed: PackFormat.EntryHeader
            do {
                parsed = try header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) }
            } catch let error as PackFormat.Malformed {
                throw StoreError.corrupted("the entry does not parse (\(error.reason))", path: file.path, offset: offset)
            }
            guard parsed.isDictionary, parsed.rawLength <= UInt32(PackFormat.maximumDictionarySize) else {
                throw StoreError.corrupted("the entry is not a dictionary", path: file.path, offset: offset)
            }
            let expected = PackReader.ExpectedEntry(digest: parsed.digest, rawLength: parsed.rawLength, storedLength: parsed.storedLength,
                                                    compressed: parsed.isCompressed)
            try PackReader.checkLengths(expected, limits: limits, path: file.path, offset: offset)
            let entry = try file.readExactly(Int(parsed.totalLength), at: offset)
            let bytes = try entry.withUnsafeBytes {
                try PackReader.decodeEntry($0, expected: expected, verify: true, limits: limits, path: file.path, offset: offset)
            }
            return (parsed, entry, bytes)
        } catch let error as StoreError where error.code == .corrupted {
            throw StoreError(code: .corrupted, message: "the dictionary at offset \(offset) of \(file.path) is damaged: \(error.message)",
                             path: file.path, offset: offset, cause: error)
        }
    }
}

/// The store's chunk dictionaries: the one new chunks are compressed with, and the decoders of
/// every dictionary read back from packs (chunks' and small blobs').
final class ChunkDictionaries: Sendable {
    /// Decoders kept at most, least recently used evicted. Reads of one chunked blob use the
    /// dictionaries of the few packs its chunks are in; small blobs share one dictionary across
    /// packs (one decoder: kept by digest); each costs about the dictionary's size twice (bytes
    /// and decoding tables).
    static let cachedDictionaries = 16

    /// Pack locations remembered at most (which dictionary each holds; a few dozen bytes each):
    /// past this the map starts over, and each location's dictionary is read and verified again.
    static let cachedLocations = 1 << 16

    private struct Current {
        /// The pack the dictionary was trained for; nil until that pack was known.
        var pack: UInt32?
        /// Nil when training failed for this pack (content no dictionary helps).
        var dictionary: ChunkDictionary?
    }

    private struct Cache {
        /// Decoders by the digest of their dictionary, with the tick of their last use.
        var dictionaries: [Digest: (dictionary: ChunkDictionary, used: UInt64)] = [:]
        /// The dictionary at each location read: the same dictionary in many packs (the small-blob
        /// dictionary) is verified once per pack and decoded by one decoder.
        var locations: [BlobLocation: Digest] = [:]
        var tick: UInt64 = 0
    }

    private struct Decision {
        var current: Current?
        /// Whether a put is training a dictionary (for whichever pack): see ``choice(forActivePack:)``.
        var training = false
    }

    /// What a batch of new chunks for the active pack is compressed with.
    enum Choice {
        /// The pack's decision: its dictionary, or nil when it has none.
        case decided(ChunkDictionary?)
        /// No decision yet, and this put trains one: it must call ``endTraining()`` when done,
        /// having called ``decide(_:forActivePack:)`` or not (too few new bytes to learn from).
        case train
        /// No decision yet while another put trains one: this batch goes without.
        case without
    }

    private let decision = Mutex(Decision())
    private let cache = Mutex(Cache())

    /// The choice for a batch bound for `activePack`: a dictionary serves the pack that was active
    /// when it was trained, so each pack's chunks get one trained on chunks of their own kind.
    ///
    /// Training is single-flight: a concurrent put for an undecided pack compresses its batch
    /// without a dictionary rather than wait for the training (tens of milliseconds, once per pack)
    /// or train a second one. It loses the dictionary's gain on that one batch, which costs less
    /// than blocking the put, and the pack still gets one dictionary. One training at a time for
    /// the whole store, not per pack: the next pack becomes active only once this one is full.
    func choice(forActivePack activePack: UInt32?) -> Choice {
        decision.withLock { decision -> Choice in
            if var decided = decision.current {
                if decided.pack == nil {
                    decided.pack = activePack
                    decision.current = decided
                }
                if decided.pack == activePack { return .decided(decided.dictionary) }
            }
            guard !decision.training else { return .without }
            decision.training = true
            return .train
        }
    }

    /// Records the outcome of training for `activePack`.
    func decide(_ dictionary: ChunkDictionary?, forActivePack activePack: UInt32?) {
        decision.withLock { $0.current = Current(pack: activePack, dictionary: dictionary) }
    }

    /// Ends the training ``choice(forActivePack:)`` handed out (``Choice/train``).
    func endTraining() {
        decision.withLock { $0.training = false }
    }

    /// The dictionary at `location`, from the cache or from `load` (whose result is cached). A
    /// loaded dictionary whose digest a decoder in the cache has is decoded by that one: both were
    /// verified against the same SHA-256, so they are the same bytes.
    func dictionary(at location: BlobLocation, load: () throws -> ChunkDictionary) throws -> ChunkDictionary {
        let cached = cache.withLock { cache -> ChunkDictionary? in
            guard let digest = cache.locations[location], let held = cache.dictionaries[digest] else { return nil }
            cache.tick += 1
            cache.dictionaries[digest] = (held.dictionary, cache.tick)
            return held.dictionary
        }
        if let cached { return cached }
        let loaded = try load()
        return cache.withLock { cache in
            if cache.locations.count >= Self.cachedLocations { cache.locations.removeAll(keepingCapacity: true) }
            cache.locations[location] = loaded.digest
            cache.tick += 1
            let dictionary = cache.dictionaries[loaded.digest]?.dictionary ?? loaded
            cache.dictionaries[loaded.digest] = (dictionary, cache.tick)
            if cache.dictionaries.count > Self.cachedDictionaries,
               let oldest = cache.dictionaries.min(by: { $0.value.used < $1.value.used })?.key {
                cache.dictionaries[oldest] = nil
            }
            return dictionary
        }
    }
}
