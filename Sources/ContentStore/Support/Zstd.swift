internal import CZstd
import Synchronization

/// zstd compression with pooled contexts: creating a context per call costs more than
/// compressing a small blob.
enum Zstd {
    /// A zstd context. Sendable because the pool hands each one to a single thread at a time.
    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }
    private static let compressors = Mutex<[Context]>([])
    private static let decompressors = Mutex<[Context]>([])

    /// The compressed form of `source`, or nil when compression would not make it smaller.
    static func compress(_ source: UnsafeRawBufferPointer, level: Int) -> [UInt8]? {
        guard source.count > 0 else { return nil }
        let context = compressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createCCtx()!)
        defer { compressors.withLock { $0.append(context) } }
        // One byte less than the input: anything that does not fit is not worth storing compressed.
        let capacity = source.count - 1
        guard capacity > 0 else { return nil }
        // Uninitialized: zero-filling (and faulting in) an input-sized buffer per call costs more than it seems.
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = ZSTD_compressCCtx(context.pointer, buffer.baseAddress, capacity, source.baseAddress, source.count, Int32(level))
            failed = ZSTD_isError(written) != 0
            count = failed ? 0 : written
        }
        return failed ? nil : output
    }

    struct DecompressionFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// The content size a frame's header declares; nil when it declares none or is not a frame.
    static func declaredContentSize(_ source: UnsafeRawBufferPointer) -> UInt64? {
        let size = ZSTD_getFrameContentSize(source.baseAddress, source.count)
        return size >= ZSTD_CONTENTSIZE_ERROR ? nil : size
    }

    /// Decompresses `source` into `destination`, which must be exactly the original size.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) throws {
        let context = decompressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createDCtx()!)
        defer { decompressors.withLock { $0.append(context) } }
        let written = ZSTD_decompressDCtx(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count)
        if ZSTD_isError(written) != 0 {
            throw DecompressionFailed(description: String(cString: ZSTD_getErrorName(written)))
        }
        guard written == destination.count else {
            throw DecompressionFailed(description: "frame holds \(written) bytes, index says \(destination.count)")
        }
    }
}
