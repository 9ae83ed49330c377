extension PackStore {
    /// Appends one entry (see ``append(_:)``).
    func append(header: [UInt8], payload: UnsafeRawBufferPointer, indexEntry: PackFormat.IndexEntry) throws -> BlobLocation {
        try append([PackEntry(header: header, payload: .borrowed(payload), indexEntry: indexEntry)])[0]
    }

    /// Appends one entry holding `frame`, compressed with `dictionary` (see ``PackEntry/DictionaryUse``).
    func append(digest: Digest, rawLength: UInt32, frame: UnsafeRawBufferPointer, dictionary: ChunkDictionary, time: UInt32) throws -> BlobLocation {
        try append([PackEntry(digest: digest, rawLength: rawLength, frame: .borrowed(frame), dictionary: dictionary, time: time)])[0]
    }
}
