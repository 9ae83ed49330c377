#if canImport(Glibc)
import Glibc
#endif

/// Small whole blobs compressed with a trained dictionary whose frames leave literals raw: on the
/// point-read blocks of `compare` (4 KiB of text) frames of the same size as without one that
/// decode in about a quarter less CPU, and decoding is most of a read that misses the cache
/// (Docs/benchmarks/analysis.md §25 and §32). When the dictionary is trained and from what:
/// ``SmallBlobDictionary``. How it is stored and found: the pack format's dictionary entries, as
/// for chunks (Docs/on-disk-format.md#dictionaries); readers, `verify` and collection handle the
/// entries as they handle chunks compressed with a dictionary.
extension LocalEngine {
    /// Bytes of small blobs a dictionary is trained on: 256 blobs of 4 KiB, about 30 ms of training
    /// once per open store (fastCover, fixed parameters) and a transient copy of the samples.
    static let smallBlobTrainingBytes = 1 << 20

    /// The dictionary's size: zstd's own default (`zstd --train`'s `--maxdict`). Trained on the
    /// point-read blocks, 64 KiB made frames 7% larger than those without a dictionary, 110 KiB
    /// 2% smaller (§32); it is written once into each pack holding a blob that uses it.
    static let smallBlobDictionarySize = 110 << 10

    /// Every this-many-th sample is held out of training and judges the dictionary: compressed
    /// with the dictionary and without, the held-out blobs must not grow by more than
    /// ``smallBlobDictionaryMaximumCost``. (Judged on the blobs it was trained on, any dictionary
    /// would look good.)
    static let smallBlobHeldOutInterval = 4

    /// The share of stored bytes a dictionary may add on the held-out blobs and still be used: its
    /// frames are for speed (raw literals), and content it does not fit (where raw literals store
    /// close to the blob's own size) must not pay for that speed in bytes.
    static let smallBlobDictionaryMaximumCost = 0.03

    /// A blob whose frame with the dictionary (and its reference) comes to more than this share of
    /// its size is compressed without one: content unlike the samples, where raw literals would
    /// cost bytes that Huffman coding saves.
    static let smallBlobDictionaryMaximumShare = 0.75

    /// The length of the frame of a small whole blob made with `dictionary`, written at the start
    /// of `output` (at least `bytes.count` long), or nil when it is not small enough
    /// (``smallBlobDictionaryMaximumShare``).
    static func smallBlobFrame(_ bytes: UnsafeRawBufferPointer, dictionary: Zstd.CompressionDictionary,
                               into output: UnsafeMutableRawBufferPointer) -> Int? {
        let limit = Int(smallBlobDictionaryMaximumShare * Double(bytes.count)) - PackFormat.dictionaryReferenceSize
        return Zstd.compress(bytes, dictionary: dictionary, into: UnsafeMutableRawBufferPointer(rebasing: output[..<max(0, limit - 1)]))
    }

    /// Whether a whole blob of `count` bytes is compressed with the small-blob dictionary (and
    /// sampled for it): not a manifest node, and no larger than ``smallBlobMaximumSize``.
    static func usesSmallBlobDictionary(count: Int, manifest: Bool) -> Bool {
        !manifest && count <= smallBlobMaximumSize
    }

    /// Keeps `bytes` (a small blob just stored compressed without a dictionary) as a sample; the
    /// put that completes the sample hands the training to the store's background work and returns
    /// (about 20 ms of CPU that a put must not wait for: Docs/benchmarks/analysis.md §42). Puts
    /// meanwhile compress without a dictionary, as while sampling.
    func sampleSmallBlob(_ bytes: UnsafeRawBufferPointer, time: UInt32) {
        guard let samples = smallBlobs.offer(bytes, trainingBytes: Self.smallBlobTrainingBytes) else { return }
        // Refused only once the store is closing: the samples go with it, as a crash's would.
        background.run("small-blob dictionary") { [self] in installSmallBlobDictionary(trainedOn: samples, time: time) }
    }

    /// Trains on `samples`, installs the result for later puts, and saves a dictionary that pays for
    /// the store's next opens (``Layout/smallBlobDictionary``). Runs as background work, which
    /// ``close()`` waits for before it releases the store: the file is written by an open store, and
    /// atomically (a crash leaves the old file or none, and the next open trains again).
    func installSmallBlobDictionary(trainedOn samples: [[UInt8]], time: UInt32) {
        seams.beforeTrainingSmallBlobDictionary?()
        let dictionary = trainSmallBlobDictionary(samples, time: time)
        smallBlobs.decide(dictionary)
        guard let dictionary else { return }
        do {
            try fileSystem.writeAtomically(dictionary.entry, to: layout.smallBlobDictionary, directory: layout.root)
        } catch {
            // The dictionary's use stands (packs carry their own copy); the next open trains again.
            logger.warning("could not save the small-blob dictionary", metadata: ["path": "\(layout.smallBlobDictionary)", "error": "\(error)"])
        }
    }

    /// Adopts the small-blob dictionary an earlier open saved, so that a store keeps one dictionary
    /// (one decoder for reads) across opens rather than training one per open. A missing file
    /// leaves the store sampling; a damaged one is logged and replaced by the next training. The
    /// file is only a seed: every pack holds its own copy of the dictionary its entries use, so
    /// nothing on disk depends on it, and it is written (synced, renamed, directory synced) only
    /// after training, whatever a crash leaves of it.
    func adoptSavedSmallBlobDictionary() {
        let path = layout.smallBlobDictionary
        guard fileSystem.kind(of: path) != .missing else { return }
        do {
            let file = try fileSystem.open(path, flags: O_RDONLY)
            let (header, _, bytes) = try ChunkDictionary.readVerified(from: file, at: 0, limits: configuration.limits)
            guard let dictionary = ChunkDictionary(trained: Array(bytes), level: configuration.compressionLevel, time: header.time,
                                                   smallInputs: (Self.smallBlobMaximumSize, Self.smallBlobMinimumMatch))
            else { throw StoreError.corrupted("zstd cannot load the dictionary", path: path, offset: 0) }
            smallBlobs.decide(dictionary)
        } catch {
            logger.warning("the saved small-blob dictionary is unreadable; a new one will be trained", metadata: [
                "path": "\(path)", "error": "\(error)",
            ])
        }
    }

    /// A dictionary trained on all but the held-out `samples`, when it keeps the held-out ones
    /// within ``smallBlobDictionaryMaximumCost`` of their size without one; else nil.
    func trainSmallBlobDictionary(_ samples: [[UInt8]], time: UInt32) -> ChunkDictionary? {
        let level = configuration.compressionLevel
        let heldOut = samples.indices.filter { $0 % Self.smallBlobHeldOutInterval == 0 }.map { samples[$0] }
        let training = samples.indices.filter { $0 % Self.smallBlobHeldOutInterval != 0 }.map { samples[$0] }
        let joined = training.flatMap { $0 }
        let trained = joined.withUnsafeBytes { raw -> [UInt8]? in
            var start = 0
            let pieces = training.map { sample -> UnsafeRawBufferPointer in
                defer { start += sample.count }
                return UnsafeRawBufferPointer(rebasing: raw[start ..< start + sample.count])
            }
            return Zstd.trainDictionary(samples: pieces, capacity: Self.smallBlobDictionarySize, level: level)
        }
        guard let trained,
              let dictionary = ChunkDictionary(trained: trained, level: level, time: time,
                                               smallInputs: (Self.smallBlobMaximumSize, Self.smallBlobMinimumMatch)),
              let compressor = dictionary.compressor
        else { return nil }
        var without = 0
        var with = 0
        for sample in heldOut {
            sample.withUnsafeBytes { raw in
                let plain = Self.plainFrameLength(raw, level: level) ?? raw.count
                without += plain
                let frame = withUnsafeTemporaryAllocation(byteCount: raw.count, alignment: 1) {
                    Self.smallBlobFrame(raw, dictionary: compressor, into: $0)
                }
                with += frame.map { $0 + PackFormat.dictionaryReferenceSize } ?? plain
            }
        }
        return Double(with) <= (1 + Self.smallBlobDictionaryMaximumCost) * Double(without) ? dictionary : nil
    }

    /// The length of the frame a small blob gets without a dictionary, or nil when it does not compress.
    private static func plainFrameLength(_ bytes: UnsafeRawBufferPointer, level: Int) -> Int? {
        var length: Int?
        _ = [UInt8](unsafeUninitializedCapacity: max(1, bytes.count - 1)) { buffer, count in
            length = Zstd.compress(bytes, into: UnsafeMutableRawBufferPointer(buffer), level: level,
                                   minimumMatch: minimumMatch(forBlobOf: bytes.count))
            count = 0
        }
        return length
    }
}
