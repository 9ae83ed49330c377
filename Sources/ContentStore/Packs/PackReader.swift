/// Walks the entries of a pack file from its headers: for rewriting a pack, verifying it, or
/// rebuilding the index from packs alone.
enum PackReader {
    /// (offset, header) of each entry, in file order. Stops at the sealed index, or at the first
    /// header that does not parse (a torn tail from a crash).
    static func entries(of file: File) throws -> [(offset: UInt64, header: PackFormat.EntryHeader)] {
        let size = try file.size()
        let end = try sealedIndexOffset(of: file, size: size) ?? size
        var entries: [(UInt64, PackFormat.EntryHeader)] = []
        var offset = UInt64(PackFormat.headerSize)
        while offset + UInt64(PackFormat.entryHeaderSize) <= end {
            let bytes = try file.readExactly(PackFormat.entryHeaderSize, at: offset)
            guard let header = try? bytes.withUnsafeBytes({ try PackFormat.parseEntryHeader($0) }),
                  offset + header.totalLength <= end
            else { break }
            entries.append((offset, header))
            offset += header.totalLength
        }
        return entries
    }

    /// Where the entries of a sealed pack end, from its footer; nil for an unsealed pack.
    static func sealedIndexOffset(of file: File, size: UInt64) throws -> UInt64? {
        guard size >= UInt64(PackFormat.headerSize + PackFormat.footerSize) else { return nil }
        let footer = try file.readExactly(PackFormat.footerSize, at: size - UInt64(PackFormat.footerSize))
        return footer.withUnsafeBytes { raw -> UInt64? in
            guard raw[0 ..< 8].elementsEqual(PackFormat.footerMagic),
                  CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0 ..< 28])) == raw.loadUnaligned(fromByteOffset: 28, as: UInt32.self).littleEndian
            else { return nil }
            let offset = raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
            return offset <= size ? offset : nil
        }
    }
}
