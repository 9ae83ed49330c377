import Dispatch
import Synchronization

/// How blobs are compressed. A large whole blob is probed first and stored raw when its samples
/// barely compress. A chunked put compresses a sample first, stores raw when nothing compresses,
/// and uses a zstd dictionary per pack, trained once on the first batch that compresses and used
/// only where it pays (Docs/chunking.md#dictionaries). Compression runs on the calling thread and
/// one helper.
extension LocalEngine {
    /// Whole blobs at least this long are probed before they are compressed: below it, a failed
    /// attempt costs less than the probe's overhead is worth (zstd gives up on random data at about
    /// 1 ms per MB, so a 1 MiB random value wasted a millisecond per put, as long as its write).
    static let compressionProbeMinimumSize = 128 << 10

    /// Samples the probe compresses, spread evenly from the blob's start to its end, so a
    /// compressible header or trailer alone does not decide for the whole blob.
    static let compressionProbeSamples = 4

    /// Bytes per probe sample: 64 KiB in all, about 6% more compression work for a 1 MiB blob that
    /// does compress, and long enough for zstd's match finder to see repeats a few KiB apart.
    static let compressionProbeSampleSize = 16 << 10

    /// The fraction of the sampled bytes compression must save for the blob to be compressed:
    /// below it, decompressing on every read costs more than the few bytes are worth.
    static let compressionProbeMinimumGain = 1.0 / 32

    /// Whole blobs at most this long are small: zstd itself picks its parameters for inputs up to
    /// 16 KiB from a table of their own, and for them the fixed cost of decoding a frame (its
    /// entropy tables, a sequence per match) is most of a read.
    static let smallBlobMaximumSize = 16 << 10

    /// The shortest match in a small blob's frame (zstd's `minMatch`; level 3 uses 4 at this
    /// size): on the point-read blocks of `compare` (4 KiB of text), frames 9% larger that decode
    /// in 38% less CPU, and a miss is mostly that decode (Docs/benchmarks/analysis.md §21). On the
    /// comparison corpus the files up to 16 KiB store 6.6% more bytes, 0.2% of all. Any level;
    /// the frames stay ordinary zstd frames, so nothing changes for readers.
    static let smallBlobMinimumMatch = 7

    /// The `minimumMatch` for compressing a whole blob of `count` bytes: ``smallBlobMinimumMatch``
    /// for a small one, else the level's own.
    static func minimumMatch(forBlobOf count: Int) -> Int? {
        count <= smallBlobMaximumSize ? smallBlobMinimumMatch : nil
    }

    /// Whether compressing `bytes` is worth trying: always for blobs shorter than
    /// ``compressionProbeMinimumSize``, otherwise when evenly spread samples save at least
    /// ``compressionProbeMinimumGain`` of their bytes.
    func worthCompressing(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let (count, size) = (Self.compressionProbeSamples, Self.compressionProbeSampleSize)
        guard bytes.count >= max(Self.compressionProbeMinimumSize, count * size) else { return true }
        let step = (bytes.count - size) / (count - 1)
        var stored = 0
        for index in 0 ..< count {
            let sample = UnsafeRawBufferPointer(rebasing: bytes[index * step ..< index * step + size])
            stored += Zstd.compress(sample, level: configuration.compressionLevel)?.count ?? size
        }
        return Double(stored) <= (1 - Self.compressionProbeMinimumGain) * Double(count * size)
    }

    /// Average chunks a dictionary is trained on: 1 MiB with the default 8 KiB chunks, enough for
    /// zstd's trainer to find what they share and cheap enough (tens of milliseconds) to do once per
    /// pack (Docs/chunking.md#dictionaries). A batch with fewer than half as many new bytes (a small
    /// edit) trains none.
    static let dictionaryTrainingChunks = 128

    /// Training bytes per byte of dictionary: 64 KiB with the defaults, the best of 32, 64 and 128 KiB
    /// measured on text (a larger dictionary costs more than it saves).
    static let dictionaryTrainingRatio = 16

    /// Chunks whose frames without a dictionary come to more than this fraction of their size get
    /// none: a dictionary does little for them, and compressing with one costs more where zstd
    /// gives up quickly on incompressible input.
    static let dictionaryCompressibility = 0.9

    /// The fraction of the stored bytes a dictionary must save to be used: compressing with one
    /// costs 10–15% more CPU, which a dictionary that does not fit the content (unrelated text,
    /// where it even costs bytes) does not pay for.
    static let dictionaryMinimumGain = 0.03

    /// Every this-many-th new chunk of a batch is compressed first, without a dictionary and, when
    /// the pack has one, with it. When none of them compresses (random or already compressed data),
    /// the others are stored raw without trying: zstd would spend about 1 ms per MB to find nothing
    /// (a compressible stretch of fewer chunks than this amid such data can thus go uncompressed).
    /// Otherwise the batch uses the dictionary only when the sample shows it pays. About 3% of a
    /// batch is compressed twice.
    static let sampleInterval = 32

    /// Batches of fewer new chunks (an edit's few) are compressed whole: too small a sample says
    /// little about the others.
    static let samplingMinimumChunks = 64

    /// The frames of a batch's new chunks, and the dictionary those that use one were compressed with.
    ///
    /// A sample of the chunks is compressed first. When none of it compresses, the rest is stored
    /// raw. Otherwise the rest is compressed with the active pack's dictionary when it has one and
    /// the sample shows it pays, else without; when the pack has no decision yet, no other put is
    /// training one, and the batch compressed (and has enough new bytes to learn from), a dictionary
    /// is trained on it and the batch compressed again with it, each chunk keeping the smaller
    /// frame. Training decides for the pack, even when it yields nothing or the dictionary does not
    /// pay: incompressible data is not trained on again until the next pack.
    func compressChunks(_ pieces: [UnsafeRawBufferPointer], time: UInt32) -> ([CompressedChunk?], ChunkDictionary?) {
        let active = packs.activePackID
        let trains: Bool
        let dictionary: ChunkDictionary?
        switch dictionaries.choice(forActivePack: active) {
        case .decided(let decided): (trains, dictionary) = (false, decided)
        case .train: (trains, dictionary) = (true, nil)
        case .without: (trains, dictionary) = (false, nil)
        }
        defer { if trains { dictionaries.endTraining() } }
        let compressor = dictionary?.compressor
        let sample = Array(stride(from: 0, to: pieces.count, by: Self.sampleInterval))
        let sampled = compress(sample.map { (pieces[$0], nil) } + (compressor == nil ? [] : sample.map { (pieces[$0], compressor) }))
        var frames = [CompressedChunk?](repeating: nil, count: pieces.count)
        for (index, frame) in zip(sample, sampled) { frames[index] = frame }
        guard pieces.count < Self.samplingMinimumChunks || frames.contains(where: { $0 != nil }) else {
            // With no frame, training finds the batch incompressible and decides the pack gets no dictionary.
            if trains { _ = trainDictionary(on: pieces, compressed: frames, forActivePack: active, time: time) }
            return (frames, nil)
        }
        var pays = false
        if compressor != nil {
            let plain = Array(sampled[..<sample.count])
            let chosen = Self.smaller(plain, Array(sampled[sample.count...]))
            pays = Self.pays(sample.map { pieces[$0] }, plain: plain, chosen: chosen)
            if pays {
                for (index, frame) in zip(sample, chosen) { frames[index] = frame }
            }
        }
        let rest = pieces.indices.filter { $0 % Self.sampleInterval != 0 }
        for (index, frame) in zip(rest, compress(rest.map { (pieces[$0], pays ? compressor : nil) })) { frames[index] = frame }
        if pays { return (frames, dictionary) }
        guard trains,
              let trained = trainDictionary(on: pieces, compressed: frames, forActivePack: active, time: time),
              let trainedCompressor = trained.compressor
        else { return (frames, nil) }
        let smaller = Self.smaller(frames, compress(pieces.map { ($0, trainedCompressor) }))
        let trainedPays = Self.pays(pieces, plain: frames, chosen: smaller)
        dictionaries.decide(trainedPays ? trained : nil, forActivePack: active)
        return trainedPays ? (smaller, trained) : (frames, nil)
    }

    /// For each chunk, the smaller of its frame without and with the dictionary (counting the
    /// dictionary reference); nil where neither is smaller than the chunk.
    private static func smaller(_ plain: [CompressedChunk?], _ withDictionary: [CompressedChunk?]) -> [CompressedChunk?] {
        zip(plain, withDictionary).map { plain, withDictionary -> CompressedChunk? in
            guard let withDictionary else { return plain }
            guard let plain else { return withDictionary }
            return withDictionary.frame.count + PackFormat.dictionaryReferenceSize < plain.frame.count ? withDictionary : plain
        }
    }

    /// Whether `chosen` (frames some of which use the dictionary) store `pieces` in at least
    /// ``dictionaryMinimumGain`` fewer bytes than `plain` (frames without), counting only the
    /// pieces that compress one way or the other: incompressible ones (random stretches of mixed
    /// content) cost the same either way and would only dilute the gain on the others.
    private static func pays(_ pieces: [UnsafeRawBufferPointer], plain: [CompressedChunk?], chosen: [CompressedChunk?]) -> Bool {
        func stored(_ piece: UnsafeRawBufferPointer, _ frame: CompressedChunk?) -> Int {
            frame.map { $0.frame.count + ($0.usesDictionary ? PackFormat.dictionaryReferenceSize : 0) } ?? piece.count
        }
        var without = 0
        var with = 0
        for index in pieces.indices where plain[index] != nil || chosen[index] != nil {
            without += stored(pieces[index], plain[index])
            with += stored(pieces[index], chosen[index])
        }
        return without > 0 && Double(with) <= (1 - dictionaryMinimumGain) * Double(without)
    }

    /// Trains a dictionary for the active pack on the first of `pieces` (`compressed` are their
    /// frames without one); nil when they are too few (no decision), or do not compress or training
    /// fails (both decided: no dictionary for the pack).
    private func trainDictionary(on pieces: [UnsafeRawBufferPointer], compressed: [CompressedChunk?], forActivePack active: UInt32?,
                                 time: UInt32) -> ChunkDictionary? {
        let trainingBytes = Self.dictionaryTrainingChunks * configuration.chunking.averageSize
        var taken = 0
        var samples: [UnsafeRawBufferPointer] = []
        for piece in pieces where taken < trainingBytes {
            samples.append(piece)
            taken += piece.count
        }
        // Too few new bytes to learn from (a small edit): it is not worth a dictionary in a new pack.
        guard taken >= trainingBytes / 2 else { return nil }
        let stored = zip(pieces, compressed).reduce(0) { $0 + ($1.1?.frame.count ?? $1.0.count) }
        let total = pieces.reduce(0) { $0 + $1.count }
        guard Double(stored) <= Self.dictionaryCompressibility * Double(total) else {
            dictionaries.decide(nil, forActivePack: active)
            return nil
        }
        seams.beforeTrainingDictionary?()
        let level = configuration.compressionLevel
        let capacity = min(trainingBytes / Self.dictionaryTrainingRatio, PackFormat.maximumDictionarySize)
        let trained = Zstd.trainDictionary(samples: samples, capacity: capacity, level: level)
            .flatMap { ChunkDictionary(trained: $0, level: level, time: time) }
        if trained == nil { dictionaries.decide(nil, forActivePack: active) }
        return trained
    }

    /// How a chunk is stored when compression helps: its zstd frame, made with the dictionary or without.
    struct CompressedChunk {
        var frame: [UInt8]
        var usesDictionary: Bool
    }

    /// The zstd frames of `jobs`' pieces (nil where compression does not help), each with its
    /// dictionary when it has one: a piece is kept compressed only when its frame, with the
    /// dictionary reference in front, is smaller than the piece, so incompressible chunks stay raw
    /// at the cost of one compression attempt, as without a dictionary. The calling thread and
    /// ``compressionHelper`` take pieces in turn as they finish: a queue of its own rather than
    /// `concurrentPerform`, whose workers come from the pool every other blocking client of
    /// Dispatch in the process shares (two cores give it two).
    private func compress(_ jobs: [(piece: UnsafeRawBufferPointer, dictionary: Zstd.CompressionDictionary?)]) -> [CompressedChunk?] {
        // A batch all sampled (or all present) leaves nothing: no hand-off to the helper for it.
        guard !jobs.isEmpty else { return [] }
        let level = configuration.compressionLevel
        let results = UnsafeMutableBufferPointer<CompressedChunk?>.allocate(capacity: jobs.count)
        results.initialize(repeating: nil)
        defer {
            results.deinitialize()
            results.deallocate()
        }
        // Each side writes only its own slots, and the buffers outlive the wait below.
        nonisolated(unsafe) let slots = results
        nonisolated(unsafe) let inputs = jobs
        Self.onTwoThreads(count: inputs.count) { index in
            let (piece, dictionary) = inputs[index]
            if let dictionary {
                slots[index] = Zstd.compress(piece, dictionary: dictionary, limit: piece.count - PackFormat.dictionaryReferenceSize)
                    .map { CompressedChunk(frame: $0, usesDictionary: true) }
            } else {
                slots[index] = Zstd.compress(piece, level: level).map { CompressedChunk(frame: $0, usesDictionary: false) }
            }
        }
        return Array(results)
    }

    /// Runs `body` for every index below `count`, on the calling thread and the helper. Each thread
    /// takes the next index until none is left, so a thread the reader (or anything else) keeps off a
    /// core leaves its share to the other instead of holding up the batch.
    static func onTwoThreads(count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let next = Atomic<Int>(0)
        let work = { @Sendable in
            while case let index = next.wrappingAdd(1, ordering: .relaxed).oldValue, index < count { body(index) }
        }
        let helped = DispatchGroup()
        compressionHelper.async(group: helped, execute: work)
        work()
        helped.wait()
    }

    /// The second thread of chunked puts, for hashing and compressing chunks (shared by concurrent puts).
    private static let compressionHelper = DispatchQueue(label: "ContentStore.chunk-compression")
}
