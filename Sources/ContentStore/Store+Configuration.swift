public import CoreMetrics
import Foundation
import Logging

extension Store {
    /// When a commit is durable.
    public enum Durability: Sendable {
        /// `write` returns after the commit (and the blobs it references) reached stable storage.
        case full
        /// `write` returns once the commit is handed to the operating system: it survives a crash
        /// of the process, not a power cut.
        case none
    }

    /// Size limits, checked before anything is written or allocated.
    public struct Limits: Sendable, Hashable {
        /// Longest key, in UTF-8 bytes.
        public var maximumKeyLength: Int = 8 * 1024
        /// Largest record value, in bytes.
        public var maximumValueLength: Int = 4 * 1024 * 1024
        /// Most references one record may hold.
        public var maximumReferencesPerRecord: Int = 1 << 20
        /// Largest encoded transaction (keys, values and references together), in bytes.
        public var maximumTransactionSize: Int = 128 * 1024 * 1024
        /// Largest blob stored as a single pack entry, in bytes: a blob that is not chunked, or one
        /// chunk. Larger blobs are chunked (``Configuration/chunkingThreshold``) and have no limit
        /// as long as the largest chunk (``Configuration/chunking``) is within this one.
        public var maximumBlobSize: Int = Int(UInt32.max) - 1
        /// Largest blob ``Store/get(_:)`` returns (it holds the whole blob in memory); a larger one
        /// is `limitExceeded`. ``Store/export(_:to:)`` streams blobs of any size. Default 1 GiB.
        public var maximumGetSize: Int = 1 << 30

        /// The defaults.
        public init() {}
    }

    /// How a store behaves. Every field has a default; change only what you need.
    public struct Configuration: Sendable {
        /// zstd level for blobs, 1...22 (levels above 19 use much more memory). Default 3.
        public var compressionLevel: Int = 3
        /// When commits are durable. Default ``Durability/full``.
        public var durability: Durability = .full
        /// How long a blob must have been unreferenced before ``Store/collectGarbage(_:)`` removes it. Default one hour.
        public var garbageGracePeriod: Duration = .seconds(3600)
        /// Whether ``Store/get(_:)`` re-hashes what it reads from a pack before returning it (without,
        /// the pack entry's CRC32C is checked). Blobs served from the read cache (``readCacheSize``)
        /// passed that check when they were read. Default true.
        public var verifiesReads: Bool = true
        /// Bytes of memory the verified blobs ``Store/get(_:)`` keeps take, each blob's bookkeeping
        /// (about 260 bytes) included, so getting a blob again skips the pack read and the re-hash.
        /// Blobs are kept decoded (a hit also skips the
        /// decompression); once the cache is full, one stored compressed to at most 0.4 of its size
        /// is kept as its compressed bytes instead (a hit decompresses it: more blobs fit). Blobs over a sixteenth of it are not kept;
        /// blobs of 256 KiB or more are kept on their second read, so large blobs read once do not push
        /// out the ones that hit. 0 turns the cache off. Default 32 MiB: a miss costs one decode and re-hash (a few
        /// microseconds for a small blob), so the cache is a saving for a hot set that fits, never a
        /// need; its memory is charged to every open store, and a process may hold several. Read-heavy
        /// users size it to their working set (Docs/benchmarks/analysis.md, section 4).
        public var readCacheSize: Int = 32 << 20
        /// The clock used for grace periods; injectable for tests.
        public var now: @Sendable () -> Date = { Date() }
        /// Size limits.
        public var limits = Limits()
        /// Blobs longer than this are split into content-defined chunks, each stored (and
        /// deduplicated) as a blob of its own, under a manifest tree whose root carries the
        /// whole content's digest: versions of a large file then share what they have in common.
        /// Must exceed ``chunking``'s maximum. Default 1 MiB.
        public var chunkingThreshold: Int = 1 << 20
        /// Chunk sizes of chunked blobs. Changing them stops new versions from sharing chunks with
        /// blobs stored before (nothing else changes). Default ``ChunkingParameters/default``.
        public var chunking: ChunkingParameters = .default
        /// A pack file is sealed and a new one started once it reaches this size. Default 64 MiB.
        public var packSizeTarget: UInt64 = 64 * 1024 * 1024
        /// A WAL segment is closed and a new one started once it reaches this size. Default 64 MiB.
        public var walSegmentSize: UInt64 = 64 * 1024 * 1024
        /// A checkpoint is written in the background once the WAL since the last one passes this size. Default 64 MiB.
        public var checkpointThreshold: UInt64 = 64 * 1024 * 1024
        /// Collection rewrites a pack once this fraction of its bytes is dead. Default 0.5.
        public var packRewriteThreshold: Double = 0.5
        /// Where the store logs: routine work at info and below, damage and failed syncs at error; never
        /// a record's value, blob bytes or a secret. Docs/operations.md lists the messages.
        public var logger = Logger(label: "ContentStore")
        /// Where the store's metrics go (Docs/operations.md lists them); nil uses the process's
        /// bootstrapped `MetricsSystem.factory`. Read once, at open.
        public var metricsFactory: (any MetricsFactory)?
        /// Whether the open store listens on `control.sock` in its directory, so that `contentstore
        /// gc|verify|stats|checkpoint` run against it while this process holds it are carried out
        /// here (Docs/control-protocol.md). Peers of another uid than this process's or root's are
        /// refused. A socket that cannot be created is logged and the store opens anyway. Default true.
        public var controlSocket = true
        /// When set, the store collects garbage (with ``garbageGracePeriod``) and writes a checkpoint
        /// (when the WAL holds anything new) at this interval, on a background queue, for as long as
        /// it is open. Runs never overlap, hold no lock for their duration, stop at ``Store/close()``,
        /// and do not keep a store that is otherwise released alive. Default nil: no periodic work.
        public var maintenanceInterval: Duration?
        /// The defaults.
        public init() {}
    }
}

extension Store {
    /// What tests substitute inside a store: the system calls it makes, two sizes of the commit path
    /// that the defaults keep out of a test's reach, and hooks at two race windows. Package access and
    /// outside ``Configuration``: nothing here is for users.
    package struct Seams: Sendable {
        /// The system calls the store makes; tests substitute fault-injecting implementations.
        var fileIO: any FileIO = SystemFileIO()
        /// A durable commit carries up to this many bytes of unsynced pack appends in its WAL batch
        /// instead of syncing the packs first: one sync per small commit instead of two, for writing
        /// those bytes twice. Default 512 KiB (Docs/durability.md has the measurements); 0 always syncs.
        var loggedPackBytesLimit = 512 * 1024
        /// Bytes of zeros a WAL segment is extended by ahead of the batches written into it, so that a
        /// commit's sync overwrites rather than appends (Docs/durability.md). Default 1 MiB (less while a
        /// segment is young); 0 appends.
        var walPreallocation: UInt64 = 1 << 20
        /// Runs in ``Store/readLatest(_:)`` between taking its unpinned view and running the body:
        /// where a test lets a writer and a collection take a blob the view references, to force
        /// the read again on a snapshot through a facade whose body it cannot reach.
        package var afterTakingUnpinnedView: (@Sendable (Store) -> Void)?
        /// Runs as a put starts training a chunk dictionary: where a test holds the training so that
        /// concurrent puts meet it.
        package var beforeTrainingDictionary: (@Sendable () -> Void)?
        /// Runs on the background thread as it starts training the small-blob dictionary: where a
        /// test holds the training to see puts and close go on without it.
        package var beforeTrainingSmallBlobDictionary: (@Sendable () -> Void)?

        /// The system's calls, the default sizes, no hooks.
        package init() {}
    }
}
