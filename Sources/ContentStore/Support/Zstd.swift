internal import CZstd
import Synchronization

/// zstd compression with pooled contexts: creating a context per call costs more than
/// compressing a small blob.
package enum Zstd {
    /// A zstd context. Sendable because the pool hands each one to a single thread at a time.
    fileprivate struct Context: @unchecked Sendable { let pointer: OpaquePointer }
    private static let compressors = Mutex<[Context]>([])
    private static let decompressors = Mutex<[Context]>([])

    /// The compressed form of `source`, or nil when compression would not make it smaller.
    package static func compress(_ source: UnsafeRawBufferPointer, level: Int) -> [UInt8]? {
        // One byte less than the input: anything that does not fit is not worth storing compressed.
        let capacity = source.count - 1
        guard capacity > 0 else { return nil }
        // Uninitialized: zero-filling (and faulting in) an input-sized buffer per call costs more than it seems.
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = compress(source, into: UnsafeMutableRawBufferPointer(buffer), level: level)
            failed = written == nil
            count = written ?? 0
        }
        return failed ? nil : output
    }

    /// Compresses `source` into `destination` and returns the frame's length, or nil when the frame
    /// would not fit (a `destination` one byte shorter than `source` keeps only frames that are smaller).
    /// A source longer than ``parallelJobSize`` is compressed by zstd's workers when no other
    /// compression holds them (``parallelCompressor``), still into one ordinary frame.
    ///
    /// `minimumMatch`, when given, overrides the level's shortest match (zstd's `minMatch`, 3...7):
    /// fewer, longer matches make a frame that decodes faster for a few more bytes. The frame is
    /// an ordinary one either way; readers cannot tell.
    static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, level: Int,
                         minimumMatch: Int? = nil) -> Int? {
        guard source.count > 0, destination.count > 0 else { return nil }
        if source.count > parallelJobSize, let parallel = parallelCompressor.withLock({ $0.take() }) {
            defer { parallelCompressor.withLock { $0 = parallel } }
            return compress(source, into: destination, level: level, context: parallel)
        }
        let context = compressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createCCtx()!)
        defer { compressors.withLock { $0.append(context) } }
        guard let minimumMatch else {
            // The one-shot call takes its parameters from `level` alone, never the context's sticky ones.
            let written = ZSTD_compressCCtx(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count, Int32(level))
            return ZSTD_isError(written) != 0 ? nil : written
        }
        // Sticky parameters: a pooled context is handed on clean.
        defer { ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters) }
        guard ZSTD_isError(ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_minMatch, Int32(minimumMatch))) == 0 else { return nil }
        return compress(source, into: destination, level: level, context: context)
    }

    /// Inputs longer than this are cut into jobs of this size that zstd's workers compress at once:
    /// its minimum job (ZSTDMT_JOBSIZE_MIN), so a 1 MiB value keeps both cores busy. Each job after
    /// the first still sees the end of the one before it (zstd's overlap), and the result is one
    /// standard frame declaring its content size: readers, and the on-disk format, cannot tell.
    static let parallelJobSize = 512 << 10

    /// zstd's workers for large inputs: as many as this machine class has cores (2).
    static let parallelWorkers = 2

    /// The one context with workers (nil while a compression holds it, or when this libzstd was
    /// built without threads). One at a time: another large blob meanwhile compresses on its own
    /// thread, as before, so concurrent puts keep the cores busy without queueing for the workers
    /// (a context whose job finds the workers' queue full spins until it is taken).
    private static let parallelCompressor = Mutex<Context?>(makeParallelContext())

    /// Whether this libzstd has workers (it was built with threads).
    static let compressesInParallel: Bool = {
        guard let probe = makeParallelContext() else { return false }
        ZSTD_freeCCtx(probe.pointer)
        return true
    }()

    private static func makeParallelContext() -> Context? {
        guard let pointer = ZSTD_createCCtx() else { return nil }
        guard ZSTD_isError(ZSTD_CCtx_setParameter(pointer, ZSTD_c_nbWorkers, Int32(parallelWorkers))) == 0,
              ZSTD_isError(ZSTD_CCtx_setParameter(pointer, ZSTD_c_jobSize, Int32(parallelJobSize))) == 0
        else {
            ZSTD_freeCCtx(pointer)
            return nil
        }
        return Context(pointer: pointer)
    }

    private static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, level: Int,
                                 context: Context) -> Int? {
        // ZSTD_compress2 starts a new frame (it resets the session), so a context whose last frame did not fit is reusable.
        guard ZSTD_isError(ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_compressionLevel, Int32(level))) == 0 else { return nil }
        let written = ZSTD_compress2(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count)
        return ZSTD_isError(written) != 0 ? nil : written
    }

    /// The frame of `source` compressed with `dictionary`, or nil when it would not be smaller than
    /// `limit` bytes. The frame names no dictionary id: the pack entry names the dictionary.
    static func compress(_ source: UnsafeRawBufferPointer, dictionary: CompressionDictionary, limit: Int) -> [UInt8]? {
        let capacity = min(limit, source.count) - 1
        guard capacity > 0 else { return nil }
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = compress(source, dictionary: dictionary, into: UnsafeMutableRawBufferPointer(buffer))
            failed = written == nil
            count = written ?? 0
        }
        return failed ? nil : output
    }

    /// ``compress(_:dictionary:limit:)`` into `destination`: the frame's length, or nil when it does
    /// not fit. A small blob's put writes the frame on its stack, where an array was an allocation
    /// and a generic-metadata lookup, cold at every put.
    static func compress(_ source: UnsafeRawBufferPointer, dictionary: CompressionDictionary, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard destination.count > 0, let context = dictionary.takeContext() else { return nil }
        defer { dictionary.giveBack(context) }
        let written = ZSTD_compress2(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count)
        return ZSTD_isError(written) != 0 ? nil : written
    }

    /// `ZSTD_c_literalCompressionMode`, which zstd.h defines as a macro naming this value (Swift
    /// imports the enum's cases, not such macros).
    private static let literalCompressionMode = ZSTD_c_experimentalParam5

    /// A zstd dictionary trained on `samples` (at most `capacity` bytes), or nil when training
    /// fails (too few or too uniform samples). fastCover with fixed parameters: one pass, no search
    /// over parameters, so it costs a few milliseconds per MiB of samples (Docs/chunking.md).
    static func trainDictionary(samples: [UnsafeRawBufferPointer], capacity: Int, level: Int) -> [UInt8]? {
        var joined: [UInt8] = []
        joined.reserveCapacity(samples.reduce(0) { $0 + $1.count })
        for sample in samples { joined.append(contentsOf: sample) }
        let sizes = samples.map(\.count)
        var parameters = ZDICT_fastCover_params_t()
        parameters.k = 256
        parameters.d = 8
        parameters.f = 18
        parameters.accel = 1
        parameters.zParams.compressionLevel = Int32(level)
        // Fixed, so the same samples give the same dictionary (the default is a random id).
        parameters.zParams.dictID = dictionaryID
        var failed = false
        let dictionary = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = joined.withUnsafeBytes { samplesBuffer in
                ZDICT_trainFromBuffer_fastCover(buffer.baseAddress, capacity, samplesBuffer.baseAddress, sizes, UInt32(sizes.count), parameters)
            }
            failed = ZDICT_isError(written) != 0
            count = failed ? 0 : written
        }
        return failed || dictionary.isEmpty ? nil : dictionary
    }

    /// The id trained dictionaries carry ("CSD1"); frames do not repeat it.
    static let dictionaryID: UInt32 = 0x3144_5343

    /// A dictionary prepared for compressing at one level (a `ZSTD_CDict`, shareable between threads).
    final class CompressionDictionary: Sendable {
        nonisolated(unsafe) fileprivate let pointer: OpaquePointer
        /// Whether frames made with it leave their literals raw (``init(_:level:smallInputs:)``).
        let rawLiterals: Bool

        /// Nil when zstd cannot load `bytes` as a dictionary.
        init?(_ bytes: [UInt8], level: Int) {
            guard let pointer = bytes.withUnsafeBytes({ ZSTD_createCDict($0.baseAddress, $0.count, Int32(level)) }) else { return nil }
            self.pointer = pointer
            rawLiterals = false
        }

        /// A dictionary for inputs of at most `size` bytes whose frames decode fast: the level's
        /// parameters for such inputs with `minimumMatch`, and literals left raw (no Huffman
        /// table to build and decode per frame; the dictionary's matches cover what Huffman coding
        /// would have saved: Docs/benchmarks/analysis.md §32). The parameters live in the
        /// `ZSTD_CDict`, because a context referencing one takes its parameters from it.
        init?(_ bytes: [UInt8], level: Int, smallInputs size: Int, minimumMatch: Int) {
            var parameters = ZSTD_getCParams(Int32(level), UInt64(size), bytes.count)
            parameters.minMatch = UInt32(minimumMatch)
            let allocator = ZSTD_customMem(customAlloc: nil, customFree: nil, opaque: nil)
            guard let pointer = bytes.withUnsafeBytes({
                ZSTD_createCDict_advanced($0.baseAddress, $0.count, ZSTD_dlm_byCopy, ZSTD_dct_auto, parameters, allocator)
            }) else { return nil }
            self.pointer = pointer
            rawLiterals = true
        }

        /// Contexts that reference this dictionary with its frame parameters set, idle: a frame
        /// starts from one as it is (`ZSTD_compress2` resets the session, not the parameters),
        /// where a pooled context needed the reference, the parameters and a reset per frame,
        /// cold code and data for a small blob's put (Docs/benchmarks/analysis.md §53). As many as
        /// compressions with this dictionary ran at once.
        private let contexts = Mutex<[Context]>([])

        deinit {
            // Each context references the dictionary: freed before it.
            contexts.withLock { $0.forEach { ZSTD_freeCCtx($0.pointer) } }
            ZSTD_freeCDict(pointer)
        }

        /// An idle context set up for this dictionary, made when none is; nil when zstd cannot make one.
        fileprivate func takeContext() -> Context? {
            if let context = contexts.withLock({ $0.popLast() }) { return context }
            guard let context = ZSTD_createCCtx() else { return nil }
            guard ZSTD_isError(ZSTD_CCtx_refCDict(context, pointer)) == 0,
                  ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_dictIDFlag, 0)) == 0,
                  !rawLiterals || ZSTD_isError(ZSTD_CCtx_setParameter(context, Zstd.literalCompressionMode, Int32(ZSTD_ps_disable.rawValue))) == 0
            else {
                ZSTD_freeCCtx(context)
                return nil
            }
            return Context(pointer: context)
        }

        fileprivate func giveBack(_ context: Context) {
            contexts.withLock { $0.append(context) }
        }
    }

    /// A dictionary prepared for decompressing (a `ZSTD_DDict`, shareable between threads), and the
    /// ``Window``s that decode small frames made with it.
    final class DecompressionDictionary: Sendable {
        nonisolated(unsafe) fileprivate let pointer: OpaquePointer
        /// The dictionary's bytes, which each window starts with.
        private let bytes: [UInt8]
        /// Idle windows, and how many exist (idle or decoding).
        private let windows = Mutex<(idle: [Window], made: Int)>(([], 0))

        /// Nil when zstd cannot load `bytes` as a dictionary.
        init?(_ bytes: UnsafeRawBufferPointer) {
            guard let pointer = ZSTD_createDDict(bytes.baseAddress, bytes.count) else { return nil }
            self.pointer = pointer
            self.bytes = Array(bytes)
        }

        deinit {
            ZSTD_freeDDict(pointer)
            // A decode holds the dictionary, so every window is idle by now.
            windows.withLock { $0.idle.forEach { $0.free() } }
        }

        /// Outputs up to this long are decoded in a window: small whole blobs (16 KiB at most,
        /// the size the engine compresses with a small-blob dictionary) and the short last
        /// chunks of chunked blobs.
        static let windowOutputCapacity = 16 << 10

        /// Windows made at most per dictionary: as many decodes at once as this machine class has
        /// cores. A decode that finds none idle goes the usual way (extDict), only slower; each
        /// window costs the dictionary's size, its decoding tables and a context (~250 KiB for a
        /// 110 KiB dictionary).
        static let windowsPerDictionary = 2

        /// Dictionaries up to this size get windows: the small-blob dictionary (110 KiB) and chunk
        /// dictionaries as small. A larger one (chunk dictionaries reach 1 MiB) would cost its size
        /// twice over per window, for the few short last chunks that decode in one.
        static let windowDictionaryMaximumSize = 128 << 10

        /// An idle window, made if fewer than ``windowsPerDictionary`` exist; nil when all are busy,
        /// the dictionary is too large for windows, or zstd cannot make one.
        fileprivate func takeWindow() -> Window? {
            guard bytes.count <= Self.windowDictionaryMaximumSize else { return nil }
            return windows.withLock { windows -> Window? in
                if let window = windows.idle.popLast() { return window }
                guard windows.made < Self.windowsPerDictionary, let window = Window(dictionary: bytes) else { return nil }
                windows.made += 1
                return window
            }
        }

        fileprivate func putBack(_ window: Window) {
            windows.withLock { $0.idle.append(window) }
        }
    }

    /// A buffer holding a dictionary's bytes followed by room for a small output, with a `ZSTD_DDict`
    /// that references those bytes in place and a context of its own. A frame decoded into the room
    /// finds the dictionary right before its output, as if it were earlier output of the same frame
    /// (zstd's contiguous prefix), so a match into the dictionary is copied inline like any other;
    /// decoded with the dictionary elsewhere (extDict), each such match is a `memmove` call of its
    /// own: 12.5% of a 4 KiB text block's read went there (Docs/benchmarks/analysis.md §46). The
    /// output is then copied out, a few hundred nanoseconds less than the calls it saves.
    fileprivate struct Window: @unchecked Sendable {
        let buffer: UnsafeMutableRawBufferPointer
        let dictionarySize: Int
        let tables: OpaquePointer
        /// Its own context: one that saw another window's dictionary last would treat this one as
        /// cold (zstd prefetches a cold dictionary's tables and content on every frame).
        let context: OpaquePointer

        init?(dictionary: [UInt8]) {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: dictionary.count + DecompressionDictionary.windowOutputCapacity,
                                                                alignment: 64)
            dictionary.withUnsafeBytes { buffer.copyMemory(from: $0) }
            let allocator = ZSTD_customMem(customAlloc: nil, customFree: nil, opaque: nil)
            guard let tables = ZSTD_createDDict_advanced(buffer.baseAddress, dictionary.count, ZSTD_dlm_byRef, ZSTD_dct_auto, allocator) else {
                buffer.deallocate()
                return nil
            }
            guard let context = ZSTD_createDCtx() else {
                ZSTD_freeDDict(tables)
                buffer.deallocate()
                return nil
            }
            self.buffer = buffer
            dictionarySize = dictionary.count
            self.tables = tables
            self.context = context
        }

        /// Decodes `source` right after the dictionary and copies the blob into `destination`;
        /// zstd's result (bytes written, or an error code).
        func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
            let output = UnsafeMutableRawBufferPointer(rebasing: buffer[dictionarySize ..< dictionarySize + destination.count])
            let written = ZSTD_decompress_usingDDict(context, output.baseAddress, output.count, source.baseAddress, source.count, tables)
            if ZSTD_isError(written) == 0 { destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: output[0 ..< written])) }
            return written
        }

        func free() {
            ZSTD_freeDCtx(context)
            ZSTD_freeDDict(tables)
            buffer.deallocate()
        }
    }

    struct DecompressionFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// The content size a frame's header declares; nil when it declares none or is not a frame.
    static func declaredContentSize(_ source: UnsafeRawBufferPointer) -> UInt64? {
        let size = ZSTD_getFrameContentSize(source.baseAddress, source.count)
        return size >= ZSTD_CONTENTSIZE_ERROR ? nil : size
    }

    /// Decompresses `frame`, made without a dictionary, into `destination`, which must be exactly the
    /// original size (the cluster engine's reads).
    package static func decompress(frame: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) throws {
        try decompress(frame, into: destination, dictionary: nil)
    }

    /// Contexts for ``decompress(_:into:inputStep:written:)``: they write straight into the
    /// caller's buffer (stable output), a setting the one-shot contexts of ``decompressors`` do not carry.
    private static let streamingDecompressors = Mutex<[Context]>([])

    /// Decompresses the frame `source` (made without a dictionary) into `destination`, which must be
    /// exactly the original size, handing zstd `inputStep` bytes of the frame at a time and calling
    /// `written` with each stretch of `destination` as soon as it is final: the caller can work on
    /// the start while the rest is decoded. Blocks are decoded straight into `destination` (no
    /// window buffer, no copy). Refuses what ``decompress(_:into:dictionary:)`` refuses: a damaged or
    /// truncated frame, bytes after it, or another size.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, inputStep: Int,
                           written: (UnsafeRawBufferPointer) -> Void) throws {
        guard let context = streamingDecompressors.withLock({ $0.popLast() }) ?? makeStreamingDecompressor() else {
            throw DecompressionFailed(description: "no decompression context")
        }
        defer {
            // A frame left half read (damage) must not leak into the next one.
            ZSTD_DCtx_reset(context.pointer, ZSTD_reset_session_only)
            streamingDecompressors.withLock { $0.append(context) }
        }
        var output = ZSTD_outBuffer(dst: destination.baseAddress, size: destination.count, pos: 0)
        var input = ZSTD_inBuffer(src: source.baseAddress, size: 0, pos: 0)
        var reported = 0
        while true {
            input.size = min(source.count, input.size + max(1, inputStep))
            let before = (input.pos, output.pos)
            let remaining = ZSTD_decompressStream(context.pointer, &output, &input)
            if ZSTD_isError(remaining) != 0 {
                throw DecompressionFailed(description: String(cString: ZSTD_getErrorName(remaining)))
            }
            if output.pos > reported {
                written(UnsafeRawBufferPointer(rebasing: destination[reported ..< output.pos]))
                reported = output.pos
            }
            if remaining == 0 { break }
            if input.size == source.count && (input.pos, output.pos) == before {
                throw DecompressionFailed(description: "frame truncated after \(output.pos) bytes")
            }
        }
        guard input.pos == source.count else {
            throw DecompressionFailed(description: "\(source.count - input.pos) bytes after the frame")
        }
        guard output.pos == destination.count else {
            throw DecompressionFailed(description: "frame holds \(output.pos) bytes, index says \(destination.count)")
        }
    }

    /// zstd's result of decoding `source` into `destination`: in a window of the dictionary when the
    /// output is small and one is idle, else with a pooled context.
    private static func decode(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                               dictionary: DecompressionDictionary?) -> Int {
        if let dictionary, destination.count <= DecompressionDictionary.windowOutputCapacity, let window = dictionary.takeWindow() {
            defer { dictionary.putBack(window) }
            return window.decompress(source, into: destination)
        }
        let context = decompressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createDCtx()!)
        defer { decompressors.withLock { $0.append(context) } }
        return ZSTD_decompress_usingDDict(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count,
                                          dictionary?.pointer)
    }

    private static func makeStreamingDecompressor() -> Context? {
        guard let pointer = ZSTD_createDCtx() else { return nil }
        guard ZSTD_isError(ZSTD_DCtx_setParameter(pointer, ZSTD_d_experimentalParam2, 1)) == 0 else {  // ZSTD_d_stableOutBuffer
            ZSTD_freeDCtx(pointer)
            return nil
        }
        return Context(pointer: pointer)
    }

    /// Decompresses `source` into `destination`, which must be exactly the original size.
    /// With `dictionary`, the frame must have been compressed with it.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                           dictionary: DecompressionDictionary? = nil) throws {
        let written = decode(source, into: destination, dictionary: dictionary)
        if ZSTD_isError(written) != 0 {
            throw DecompressionFailed(description: String(cString: ZSTD_getErrorName(written)))
        }
        guard written == destination.count else {
            throw DecompressionFailed(description: "frame holds \(written) bytes, index says \(destination.count)")
        }
    }
}
