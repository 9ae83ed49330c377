/// Chunk size bounds for content-defined chunking (see ``Chunker`` and `Docs/chunking.md`).
///
/// `averageSize` is a power of two and `minimumSize < averageSize < maximumSize`. The initializer
/// accepts anything, so that values read from a configuration never trap; call ``validate()``
/// (or use ``Chunker/init(validating:)``) before chunking with values a user supplied.
public struct ChunkingParameters: Hashable, Sendable {
    /// No chunk except the last one of an input is shorter than this.
    public var minimumSize: Int
    /// The size the boundary masks are tuned for; a power of two.
    public var averageSize: Int
    /// No chunk is longer than this: a cut is forced here when the content offers none.
    public var maximumSize: Int

    /// Bounds as given; ``Store/init(at:configuration:)`` refuses invalid ones with `invalidArgument`.
    public init(minimumSize: Int, averageSize: Int, maximumSize: Int) {
        self.minimumSize = minimumSize
        self.averageSize = averageSize
        self.maximumSize = maximumSize
    }

    /// 2 KiB minimum, 8 KiB average, 64 KiB maximum — chosen by measurement (`Docs/chunking.md`).
    ///
    /// Workload of the product target: 100 versions of a 16 MiB file, each a 4 KiB overwrite at a
    /// random offset in the previous one. Modelled store: per-chunk zstd-3, a content-defined
    /// manifest tree (40 B entries, fan-out 32), 48 B of index per chunk. Stored bytes after 100
    /// versions ÷ zstd-3 of one whole version (the target is ≤ 1.5):
    ///
    /// | min/avg/max   | random | text, zstd 3.7x | C headers, zstd 5.6x | new chunks per edit |
    /// |---------------|--------|-----------------|----------------------|---------------------|
    /// | 1K/4K/16K     | 1.13   | 1.59            | 2.03                 | 2.9                 |
    /// | **2K/8K/64K** | 1.15   | 1.50            | 1.86                 | 2.0                 |
    /// | 4K/16K/64K    | 1.23   | 1.50            | 1.71                 | 1.6                 |
    /// | 8K/32K/128K   | 1.37   | 1.58            | 1.79                 | 1.3                 |
    /// | 16K/64K/256K  | 1.62   | 1.76            | 1.97                 | 1.2                 |
    ///
    /// An edit rewrites about two chunks, so its cost grows with the average: 64 KiB fails even on
    /// incompressible data, and 8 KiB stores edits at half the cost of 16 KiB. Smaller averages lose
    /// on compressible data because zstd compresses small chunks worse and per-chunk overhead doubles.
    /// On highly compressible data the loss from compressing chunks independently (1.46x at 8 KiB,
    /// 1.33x at 16 KiB for one version of the headers) dominates at every size; that is for the
    /// engine to recover (a shared zstd dictionary takes it to 1.28x), not for the chunk size.
    /// The minimum of avg/4 skips a quarter of the hashing at no measurable cost. The maximum was
    /// never reached on any corpus (past the average the 11-bit loose mask makes a chunk longer than
    /// 32 KiB a ~5-in-a-million event, so 32 KiB and 64 KiB measured identically); 8x the average
    /// rather than 4x halves the chunk count of low-entropy runs (zero-filled regions never cut).
    public static let `default` = ChunkingParameters(minimumSize: 2 << 10, averageSize: 8 << 10, maximumSize: 64 << 10)

    /// The smallest accepted `minimumSize`. The boundary test looks at the 64 bytes ending at a
    /// candidate cut (the gear hash window); a minimum of at least 64 lets that window lie entirely
    /// inside the chunk, which makes every boundary decision depend on local content only.
    static let minimumSizeLimit = 64
    /// Accepted `averageSize` range. Below 256 B the per-chunk overhead (digest, index entry) dominates;
    /// above 16 MiB chunks defeat the purpose of deduplication and cost memory per chunk.
    static let averageSizeRange = 256...(16 << 20)
    /// The largest accepted `maximumSize`: a chunk is held in memory while it is hashed and compressed.
    static let maximumSizeLimit = 64 << 20

    /// Why a set of parameters was refused.
    enum ValidationError: Error, Hashable, Sendable, CustomStringConvertible {
        case minimumSizeTooSmall(Int)
        case averageSizeNotPowerOfTwo(Int)
        case averageSizeOutOfRange(Int)
        case minimumNotBelowAverage(minimum: Int, average: Int)
        case maximumNotAboveAverage(average: Int, maximum: Int)
        case maximumSizeTooLarge(Int)

        var description: String {
            switch self {
            case .minimumSizeTooSmall(let value):
                "chunk minimum size \(value) is below \(ChunkingParameters.minimumSizeLimit)"
            case .averageSizeNotPowerOfTwo(let value):
                "chunk average size \(value) is not a power of two"
            case .averageSizeOutOfRange(let value):
                "chunk average size \(value) is outside \(ChunkingParameters.averageSizeRange)"
            case .minimumNotBelowAverage(let minimum, let average):
                "chunk minimum size \(minimum) is not below the average size \(average)"
            case .maximumNotAboveAverage(let average, let maximum):
                "chunk maximum size \(maximum) is not above the average size \(average)"
            case .maximumSizeTooLarge(let value):
                "chunk maximum size \(value) is above \(ChunkingParameters.maximumSizeLimit)"
            }
        }
    }

    /// Throws the first rule these parameters break; returns when they can be used by a ``Chunker``.
    func validate() throws(ValidationError) {
        // Order matters only for which message a caller sees; check the independent rules first.
        guard minimumSize >= Self.minimumSizeLimit else { throw .minimumSizeTooSmall(minimumSize) }
        guard averageSize > 0, averageSize & (averageSize - 1) == 0 else {
            throw .averageSizeNotPowerOfTwo(averageSize)
        }
        guard Self.averageSizeRange.contains(averageSize) else { throw .averageSizeOutOfRange(averageSize) }
        guard maximumSize <= Self.maximumSizeLimit else { throw .maximumSizeTooLarge(maximumSize) }
        guard minimumSize < averageSize else {
            throw .minimumNotBelowAverage(minimum: minimumSize, average: averageSize)
        }
        guard averageSize < maximumSize else {
            throw .maximumNotAboveAverage(average: averageSize, maximum: maximumSize)
        }
    }

    /// Whether ``validate()`` would succeed.
    package var isValid: Bool {
        do {
            try validate()
            return true
        } catch {
            return false
        }
    }
}

extension ChunkingParameters {
    /// The lengths of the chunks `bytes` is cut into with these parameters, in order (they add up
    /// to `bytes.count`): how a store with these parameters chunks a blob of these bytes. The same
    /// bytes always give the same lengths (Docs/chunking.md).
    ///
    /// - Throws: `invalidArgument` when the parameters are invalid.
    public func chunkLengths(of bytes: UnsafeRawBufferPointer) throws -> [Int] {
        do {
            return try Chunker(validating: self).chunkLengths(of: bytes)
        } catch {
            throw StoreError.invalidArgument("\(error)")
        }
    }
}
