import CBenchZstd
import Foundation
import Synchronization

/// zstd for the peers, with pooled contexts exactly as the engine pools its own, so the peers pay
/// the same per-call cost for compression as ContentStore does.
public enum ZstdCodec {
    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }
    private static let compressors = Mutex<[Context]>([])
    private static let decompressors = Mutex<[Context]>([])

    /// The compressed bytes, or nil when compression would not make them smaller (store raw then).
    public static func compress(_ source: UnsafeRawBufferPointer, level: Int = 3) -> [UInt8]? {
        guard source.count > 1 else { return nil }
        let context = compressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createCCtx()!)
        defer { compressors.withLock { $0.append(context) } }
        let capacity = source.count - 1
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = ZSTD_compressCCtx(context.pointer, buffer.baseAddress, capacity, source.baseAddress, source.count, Int32(level))
            count = ZSTD_isError(written) == 0 ? written : 0
        }.nilIfEmpty
    }

    /// The decompressed size a frame declares (0 if unknown or not a frame).
    public static func frameContentSize(_ frame: Data) -> Int {
        frame.withUnsafeBytes { bytes in
            let size = ZSTD_getFrameContentSize(bytes.baseAddress, bytes.count)
            return size >= UInt64.max - 1 ? 0 : Int(size)  // ZSTD_CONTENTSIZE_ERROR, _UNKNOWN
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Decompresses a frame into `destination`, which must be exactly the original size.
    public static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) throws {
        let context = decompressors.withLock { $0.popLast() } ?? Context(pointer: ZSTD_createDCtx()!)
        defer { decompressors.withLock { $0.append(context) } }
        let written = ZSTD_decompressDCtx(context.pointer, destination.baseAddress, destination.count, source.baseAddress, source.count)
        guard ZSTD_isError(written) == 0 else { throw Failure(description: String(cString: ZSTD_getErrorName(written))) }
        guard written == destination.count else { throw Failure(description: "frame holds \(written) bytes, expected \(destination.count)") }
    }
}

extension Array {
    fileprivate var nilIfEmpty: Self? { isEmpty ? nil : self }
}
