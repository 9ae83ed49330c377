/// An entry to append: its header and payload, and its line in the pack's trailing index.
struct PackEntry {
    /// The payload's bytes: borrowed for the duration of the append, or owned.
    enum Payload {
        case borrowed(UnsafeRawBufferPointer)
        case owned([UInt8])

        var count: Int {
            switch self {
            case .borrowed(let bytes): bytes.count
            case .owned(let bytes): bytes.count
            }
        }

        func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            switch self {
            case .borrowed(let bytes): try body(bytes)
            case .owned(let bytes): try bytes.withUnsafeBytes(body)
            }
        }
    }

    var header: [UInt8]
    var payload: Payload
    var indexEntry: PackFormat.IndexEntry
    var length: UInt64 { UInt64(header.count + payload.count) }
}
