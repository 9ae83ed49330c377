// A WAL segment as recovery reads it: framing, torn-tail versus damage, record decoding, and the
// records applied to the state, as replay does. Input: a flags byte (bit 0: the segment is the
// last one; bit 1: repair checksums first, as a forged file would have them), then the segment.
@testable import ContentStore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWALSegment(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = FuzzInput(UnsafeRawBufferPointer(start: start, count: count))
    var file = input.file
    if input.flag(1) { repairWALChecksums(&file) }
    var state = StoreState()
    _ = try? file.withUnsafeBytes { bytes in
        try WALSegmentReader.read(bytes, path: "fuzz.log", expectedNumber: 1, isLast: input.flag(0), limits: fuzzLimits) { record, _ in
            try state.apply(record)
        }
    }
    return 0
}
