// A checkpoint as opening loads it. Input: a flags byte (bit 0: repair checksums first, as a forged
// file would have them), then the file.
@testable import ContentStore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCheckpoint(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = FuzzInput(UnsafeRawBufferPointer(start: start, count: count))
    var file = input.file
    if input.flag(0) { repairCheckpointChecksums(&file) }
    if let contents = try? Checkpoint.decode(memoryFile(file, path: "fuzz.ckpt"), limits: fuzzLimits) {
        // What opening does next with the state: statistics and record lookups.
        _ = contents.state.blobs.liveBytesByPack.values.reduce(0, &+)
        for (key, _) in contents.state.records { _ = contents.state.records[key] }
    }
    return 0
}
