// Owns: a UUID's text as Persist's keys and bodies hold it, exactly `uuidString` (36 characters,
// uppercase hex, 8-4-4-4-12). Foundation formats it through `snprintf` and a C string on every
// call; a save names its entity's key and writes its ID into the body, so the formatting was a
// share of every write's own CPU (Docs/benchmarks/analysis.md, session 14).
import Foundation

extension UUID {
    /// The 36 characters of `uuidString`.
    var text: String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            writeText(to: buffer)
            return 36
        }
    }

    /// Writes the 36 ASCII bytes of ``text`` at the start of `buffer`, which holds at least 36.
    func writeText(to buffer: UnsafeMutableBufferPointer<UInt8>) {
        let digits: StaticString = "0123456789ABCDEF"
        withUnsafeBytes(of: uuid) { bytes in
            var out = 0
            for (index, byte) in bytes.enumerated() {
                // Dashes go before bytes 4, 6, 8 and 10: the 8-4-4-4-12 groups.
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    buffer[out] = UInt8(ascii: "-")
                    out += 1
                }
                buffer[out] = digits.utf8Start[Int(byte >> 4)]
                buffer[out + 1] = digits.utf8Start[Int(byte & 0x0F)]
                out += 2
            }
        }
    }
}
