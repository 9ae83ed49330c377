/// Reads a pack's entries front to back in large chunks: a rewrite reads every entry, and a read
/// per entry would cost a system call per blob. Stops at the end of the entries, or at the first
/// header that does not parse (a torn tail, or damage, which the caller notices by what it missed).
struct PackEntryScanner {
    struct Entry {
        var offset: UInt64
        var header: PackFormat.EntryHeader
        /// Where the entry (header and payload) sits in the buffer ``next()`` returned with it.
        var range: Range<Int>
    }

    static let chunkSize = 4 << 20

    let file: File
    let end: UInt64
    private var offset = UInt64(PackFormat.headerSize)
    private var finished = false

    init(file: File, end: UInt64) {
        self.file = file
        self.end = end
    }

    /// The next whole entries and the bytes holding them; no entries at the end.
    mutating func next() throws -> (buffer: [UInt8], entries: [Entry]) {
        guard !finished, offset + UInt64(PackFormat.entryHeaderSize) <= end else { return ([], []) }
        var length = Int(min(UInt64(Self.chunkSize), end - offset))
        while true {
            let buffer = try file.readExactly(length, at: offset)
            var entries: [Entry] = []
            var position = 0
            var needed: Int?
            while position + PackFormat.entryHeaderSize <= buffer.count {
                let parsed = try? buffer.withUnsafeBytes {
                    try PackFormat.parseEntryHeader(UnsafeRawBufferPointer(rebasing: $0[position ..< position + PackFormat.entryHeaderSize]))
                }
                guard let header = parsed, offset + UInt64(position) + header.totalLength <= end else {
                    finished = true
                    break
                }
                guard position + Int(header.totalLength) <= buffer.count else {
                    needed = Int(header.totalLength)
                    break
                }
                entries.append(Entry(offset: offset + UInt64(position), header: header, range: position ..< position + Int(header.totalLength)))
                position += Int(header.totalLength)
            }
            if entries.isEmpty, let needed, !finished {
                length = needed  // one entry larger than a chunk: read it whole
                continue
            }
            offset += UInt64(position)
            if entries.isEmpty { finished = true }
            return (buffer, entries)
        }
    }
}
