import ContentStore
import Foundation

extension Digest {
    /// The 32 digest bytes (the peers store digests as 32-byte keys, as ContentStore does).
    public var bytes: Data {
        var data = Data(capacity: 32)
        var high: UInt8 = 0
        for (i, c) in hex.utf8.enumerated() {
            let nibble = c <= 57 ? c - 48 : c - 87
            if i & 1 == 0 { high = nibble << 4 } else { data.append(high | nibble) }
        }
        return data
    }
}
