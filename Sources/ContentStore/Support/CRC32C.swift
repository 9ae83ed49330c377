internal import CContentStoreSupport
import Foundation

/// CRC32C (Castagnoli), hardware-accelerated where the CPU allows. Checksums every WAL record,
/// checkpoint frame and pack entry, and the cluster engine's pack objects.
package enum CRC32C {
    /// The CRC of `bytes`, continuing `crc` (the CRC of the bytes before them).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, extending crc: UInt32 = 0) -> UInt32 {
        cs_crc32c_extend(crc, bytes.baseAddress, bytes.count)
    }

    /// The CRC of `bytes`, continuing `crc`.
    package static func checksum(_ bytes: some ContiguousBytes, extending crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, extending: crc) }
    }

    /// LevelDB's masking: a CRC stored next to the data it covers is rotated and offset, so that
    /// the CRC of a buffer that itself embeds CRCs does not degenerate.
    static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
    }
}
