/// An entry to append: its header and payload, and its line in the pack's trailing index.
struct PackEntry {
    /// The payload's bytes: borrowed for the duration of the append, or owned.
    enum Payload {
        case borrowed(UnsafeRawBufferPointer)
        case owned([UInt8])
        /// Borrowed, after `PackFormat.entryHeaderSize` bytes of room that the append may fill with
        /// the entry's header: an entry written alone then takes one `pwrite`, and nothing is copied.
        case framed(UnsafeMutableRawBufferPointer)

        var count: Int {
            switch self {
            case .borrowed(let bytes): bytes.count
            case .owned(let bytes): bytes.count
            case .framed(let buffer): buffer.count - PackFormat.entryHeaderSize
            }
        }

        func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            switch self {
            case .borrowed(let bytes): try body(bytes)
            case .owned(let bytes): try bytes.withUnsafeBytes(body)
            case .framed(let buffer): try body(UnsafeRawBufferPointer(rebasing: buffer[PackFormat.entryHeaderSize...]))
            }
        }
    }

    /// How an entry compressed with a dictionary is written: `header` is empty and `payload` the
    /// frame; the header and the payload's reference are made where the entry lands, since they
    /// name the dictionary's offset in that pack (written there first when the pack lacks it).
    struct DictionaryUse {
        var dictionary: ChunkDictionary
        var time: UInt32
    }

    var header: [UInt8]
    var payload: Payload
    var indexEntry: PackFormat.IndexEntry
    var dictionaryUse: DictionaryUse?
    /// Bytes of the entry, header included (its dictionary's entry not).
    var length: UInt64 {
        UInt64(dictionaryUse == nil ? header.count + payload.count : PackFormat.entryHeaderSize + PackFormat.dictionaryReferenceSize + payload.count)
    }

    init(header: [UInt8], payload: Payload, indexEntry: PackFormat.IndexEntry) {
        self.header = header
        self.payload = payload
        self.indexEntry = indexEntry
    }

    /// An entry whose payload is `frame`, compressed with `dictionary`.
    init(digest: Digest, rawLength: UInt32, frame: Payload, dictionary: ChunkDictionary, time: UInt32) {
        header = []
        payload = frame
        indexEntry = PackFormat.IndexEntry(digest: digest, offset: 0, rawLength: rawLength,
                                           storedLength: UInt32(PackFormat.dictionaryReferenceSize + frame.count))
        dictionaryUse = DictionaryUse(dictionary: dictionary, time: time)
    }

    /// The header and the payload's leading dictionary reference, for an entry that uses the
    /// dictionary written at `dictionaryOffset`; for any other entry its header.
    func encodedHeader(dictionaryOffset: UInt64) -> [UInt8] {
        guard let dictionaryUse else { return header }
        let (header, reference) = payload.withUnsafeBytes {
            PackFormat.dictionaryCompressedEntry(digest: indexEntry.digest, rawLength: indexEntry.rawLength, dictionaryOffset: dictionaryOffset,
                                                 frame: $0, time: dictionaryUse.time)
        }
        return header + reference
    }
}
