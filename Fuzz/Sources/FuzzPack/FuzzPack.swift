// A pack as the store reads it: the sealed footer, the entry walk (PackReader and the chunked
// scanner collection uses), and each entry's header parsed and its blob decoded and decompressed
// under the limits, as `get` does with an index that agrees with the entry (a forged one would),
// with the dictionary an entry names read from the pack as `get` reads it.
// Input: a flags byte (bit 0: repair checksums first; bit 1: re-hash the blobs rather than check
// the entry CRC), then the pack file.
@testable import ContentStore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPack(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = FuzzInput(UnsafeRawBufferPointer(start: start, count: count))
    var bytes = input.file
    if input.flag(0) { repairPackChecksums(&bytes) }
    let file = memoryFile(bytes)
    guard let entries = try? PackReader.entries(of: file) else { return 0 }
    for (offset, header) in entries {
        let expected = PackReader.ExpectedEntry(digest: header.digest, rawLength: header.rawLength, storedLength: header.storedLength,
                                                compressed: header.isCompressed)
        guard (try? PackReader.checkLengths(expected, limits: fuzzLimits, path: file.path, offset: offset)) != nil,
              let stored = try? file.readExactly(PackFormat.entryHeaderSize + Int(header.storedLength), at: offset)
        else { continue }
        _ = try? stored.withUnsafeBytes {
            try PackReader.decodeEntry($0, expected: expected, verify: input.flag(1), limits: fuzzLimits, path: file.path, offset: offset) {
                try ChunkDictionary.read(from: file, at: $0, limits: fuzzLimits)
            }
        }
    }
    if let end = try? PackReader.sealedIndexOffset(of: file, size: UInt64(bytes.count)) ?? UInt64(bytes.count) {
        var scanner = PackEntryScanner(file: file, end: end)
        while let (_, found) = try? scanner.next(), !found.isEmpty {}
    }
    return 0
}
