#if canImport(Glibc)
import Glibc
#endif

/// Writes pack bytes the WAL carried (``LogRecord/packBytes(_:)``) back into their packs.
///
/// A durable commit may carry the pack bytes it relies on in its WAL batch instead of syncing the
/// pack, so a power cut can leave the WAL holding bytes the pack lacks: torn, zeroed, or beyond the
/// end of the file. Recovery writes every carried range back in log order and syncs those packs
/// before the store is used. Every range is written, even one that reads back right: what reads back
/// may be pages a crashed process left in the page cache, not yet on disk, or pages a failed sync
/// marked clean without writing ("fsyncgate"); either would be lost once a checkpoint deletes the
/// segments that carry them. All the carried bytes are written back, not only the live blobs', so a
/// pack stays walkable from entry to entry (collection's rewrite walks it). A pack that no longer
/// exists was deleted by collection after its blobs moved or died, and nothing is written for it:
/// the directory is synced before a commit relies on a new pack, so a pack a commit needs is never
/// missing for want of that.
///
/// The ranges a pack's commits carried continue it where its synced or carried bytes end, so in log
/// order each starts at or before the pack's end: also when the file is shorter than they say (a small
/// put's bytes wait in memory until written, ``PackStore/State/deferred``, so a process killed after
/// its commit leaves them only in the WAL) or empty (a new pack whose header never reached the disk). One that starts past it is not one the store wrote
/// (a forged or misdirected record): it is `corrupted`, and nothing is written far beyond the end.
struct PackRepair {
    let directory: String
    let fileSystem: FileSystem
    /// Open packs by id, with their sizes as restored so far; nil for a pack that does not exist.
    private var files: [UInt32: (file: File, size: UInt64)?] = [:]
    private var written: [UInt32: File] = [:]
    /// One more than the highest pack the WAL carried bytes for.
    private(set) var firstNewPackID: UInt32 = 1

    init(directory: String, fileSystem: FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
    }

    /// Packs written to so far.
    var packsWritten: Int { written.count }

    mutating func restore(_ logged: LogRecord.PackBytes) throws {
        firstNewPackID = max(firstNewPackID, logged.pack &+ 1)
        guard let (file, size) = try file(logged.pack) else { return }
        guard logged.offset <= size else {
            throw StoreError.corrupted("the WAL carries bytes for pack \(logged.pack) from offset \(logged.offset), past its end at \(size)",
                                       path: file.path, offset: logged.offset)
        }
        try file.write(logged.bytes, at: logged.offset)
        files[logged.pack] = (file, max(size, logged.offset + UInt64(logged.bytes.count)))
        written[logged.pack] = file
    }

    /// Makes the written bytes durable.
    func finish() throws {
        for file in written.values { try file.synchronizeData() }
    }

    private mutating func file(_ pack: UInt32) throws -> (file: File, size: UInt64)? {
        if let known = files[pack] { return known }
        let path = directory + "/" + PackFormat.fileName(pack)
        let file = fileSystem.kind(of: path) == .missing ? nil : try fileSystem.open(path, flags: O_RDWR)
        let opened = try file.map { ($0, try $0.size()) }
        files[pack] = opened
        return opened
    }
}
