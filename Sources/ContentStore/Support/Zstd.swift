internal import CZstd
import Synchronization

/// zstd compression with pooled contexts: creating a context per call costs more than
/// compressing a small blob.
package enum Zstd {
    /// A zstd context. Sendable because the pool hands each one to a single thread at a time.
    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }
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
    static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, level: Int) -> Int? {
        guard source.count > 0, destination.count > 0 else { return nil }
        let context = compressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createCCtx()!)
        defer { compressors.withLock { $0.append(context) } }
        let written = ZSTD_compressCCtx(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count, Int32(level))
        return ZSTD_isError(written) != 0 ? nil : written
    }

    /// The frame of `source` compressed with `dictionary`, or nil when it would not be smaller than
    /// `limit` bytes. The frame names no dictionary id: the pack entry names the dictionary.
    static func compress(_ source: UnsafeRawBufferPointer, dictionary: CompressionDictionary, limit: Int) -> [UInt8]? {
        let capacity = min(limit, source.count) - 1
        guard capacity > 0 else { return nil }
        let context = compressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createCCtx()!)
        defer {
            // The dictionary and the parameters are sticky; a pooled context is handed on clean.
            ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters)
            compressors.withLock { $0.append(context) }
        }
        guard ZSTD_isError(ZSTD_CCtx_refCDict(context.pointer, dictionary.pointer)) == 0,
              ZSTD_isError(ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_dictIDFlag, 0)) == 0
        else { return nil }
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = ZSTD_compress2(context.pointer, buffer.baseAddress, capacity, source.baseAddress, source.count)
            failed = ZSTD_isError(written) != 0
            count = failed ? 0 : written
        }
        return failed ? nil : output
    }

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

        /// Nil when zstd cannot load `bytes` as a dictionary.
        init?(_ bytes: [UInt8], level: Int) {
            guard let pointer = bytes.withUnsafeBytes({ ZSTD_createCDict($0.baseAddress, $0.count, Int32(level)) }) else { return nil }
            self.pointer = pointer
        }

        deinit { ZSTD_freeCDict(pointer) }
    }

    /// A dictionary prepared for decompressing (a `ZSTD_DDict`, shareable between threads).
    final class DecompressionDictionary: Sendable {
        nonisolated(unsafe) fileprivate let pointer: OpaquePointer

        /// Nil when zstd cannot load `bytes` as a dictionary.
        init?(_ bytes: UnsafeRawBufferPointer) {
            guard let pointer = ZSTD_createDDict(bytes.baseAddress, bytes.count) else { return nil }
            self.pointer = pointer
        }

        deinit { ZSTD_freeDDict(pointer) }
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

    /// Decompresses `source` into `destination`, which must be exactly the original size.
    /// With `dictionary`, the frame must have been compressed with it.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                           dictionary: DecompressionDictionary? = nil) throws {
        let context = decompressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createDCtx()!)
        defer { decompressors.withLock { $0.append(context) } }
        let written = ZSTD_decompress_usingDDict(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count,
                                                 dictionary?.pointer)
        if ZSTD_isError(written) != 0 {
            throw DecompressionFailed(description: String(cString: ZSTD_getErrorName(written)))
        }
        guard written == destination.count else {
            throw DecompressionFailed(description: "frame holds \(written) bytes, index says \(destination.count)")
        }
    }
}
