#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension LocalEngine {
    struct Recovered {
        var state: StoreState
        var segment: WriteAheadLog.Segment
        var olderSegments: [UInt64: UInt64]
        var replayedRecords: Int
        /// Packs the WAL's pack bytes were written back into.
        var packsRestored: Int
        /// Where new pack numbers start (``PackStore/init(directory:sizeTarget:fileSystem:firstNewID:)``).
        var firstNewPackID: UInt32
    }

    /// Creates or checks the directory, takes the lock, and recovers the state.
    static func openDirectory(_ layout: Layout, fileSystem: FileSystem, configuration: Configuration) throws -> (File, Recovered) {
        switch fileSystem.kind(of: layout.root) {
        case .missing:
            try createDirectories(layout.root, fileSystem: fileSystem)
        case .other:
            throw StoreError(code: .unsupportedFormat, message: "\(layout.root) is not a directory", path: layout.root)
        case .directory:
            break
        }
        let names = try fileSystem.contents(of: layout.root)
        // LOCK and FORMAT.tmp alone are what a crash while creating a store leaves.
        guard names.contains("FORMAT") || names.allSatisfy({ $0 == "LOCK" || $0 == "FORMAT.tmp" }) else {
            throw StoreError(
                code: .unsupportedFormat,
                message: "\(layout.root) is not a ContentStore store: it holds files but no FORMAT", path: layout.root)
        }
        let lock = try acquireLock(layout, fileSystem: fileSystem)
        // FORMAT first: a directory holding anything more is a store, so it must be marked as one.
        if fileSystem.kind(of: layout.format) == .missing {
            try fileSystem.writeAtomically(FormatFile.encoded(), to: layout.format, directory: layout.root)
            // Again here, not only when the directory is made: an earlier attempt may have failed after mkdir.
            let parent = (layout.root as NSString).deletingLastPathComponent
            if !parent.isEmpty, parent != layout.root { try fileSystem.synchronizeDirectory(parent) }
        }
        try FormatFile.check(try fileSystem.readFile(layout.format, maximumSize: FormatFile.maximumFileSize), path: layout.format)
        for directory in [layout.wal, layout.packs, layout.checkpoints] {
            switch fileSystem.kind(of: directory) {
            case .missing:
                try fileSystem.createDirectory(directory)
            case .directory:
                break
            case .other:
                // A symlink (or a file) in place of a store directory: never followed out of the store.
                throw StoreError.corrupted("\(directory) is not a directory (the store does not follow symlinks)", path: directory)
            }
        }
        // Their entries must be durable before files in them are; synced at every open, as an earlier
        // open may have made them and failed before its sync.
        try fileSystem.synchronizeDirectory(layout.root)
        return (lock, try recover(layout, fileSystem: fileSystem, limits: configuration.limits))
    }

    /// `mkdir -p`, each level 0700, each made durable in its parent (or a power cut could take the
    /// whole store, acknowledged commits and all).
    private static func createDirectories(_ path: String, fileSystem: FileSystem) throws {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, fileSystem.kind(of: parent) == .missing {
            try createDirectories(parent, fileSystem: fileSystem)
        }
        try fileSystem.createDirectory(path)
        if !parent.isEmpty, parent != path { try fileSystem.synchronizeDirectory(parent) }
    }

    private static func acquireLock(_ layout: Layout, fileSystem: FileSystem) throws -> File {
        let file = try fileSystem.open(layout.lock, flags: O_RDWR | O_CREAT)
        var wait: useconds_t = 1000
        while try !file.tryLockExclusively() {
            // A pid and a newline: at most 32 bytes are read, whatever size the file claims.
            let holder = (try? file.readExactly(Int(min(try file.size(), 32)), at: 0)).map { String(decoding: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let pid = holder.flatMap { Int32($0) }
            // A child this process is spawning holds a copy of every descriptor, close-on-exec ones
            // included, until it executes: a store this process just closed can look locked by this
            // very process for a few milliseconds. Wait that out (briefly) instead of reporting it.
            if pid == getpid() && wait <= 128_000 {
                usleep(wait)
                wait *= 2
                continue
            }
            let who = pid.map { "process \($0)" } ?? "another process"
            throw StoreError(code: .locked, message: "the store at \(layout.root) is open in \(who)", path: layout.lock)
        }
        try file.truncate(to: 0)
        try file.write(Array("\(getpid())\n".utf8), at: 0)
        return file
    }

    /// Newest checkpoint + replay of the WAL segments from the one it names.
    private static func recover(_ layout: Layout, fileSystem: FileSystem, limits: Limits) throws -> Recovered {
        var checkpoints: [UInt64] = []
        for name in try fileSystem.contents(of: layout.checkpoints) {
            if name.hasSuffix(".tmp") {
                try fileSystem.remove(layout.checkpoints + "/" + name)  // an unfinished checkpoint
            } else if let number = Checkpoint.firstSegment(fromFileName: name) {
                checkpoints.append(number)
            }
        }
        var state = StoreState()
        var firstSegment: UInt64 = 1
        if let newest = checkpoints.max() {
            let contents = try Checkpoint.load(path: layout.checkpoints + "/" + Checkpoint.fileName(newest), limits: limits, fileSystem: fileSystem)
            guard contents.firstSegment == newest else {
                throw StoreError.corrupted("checkpoint names segment \(contents.firstSegment) but is filed as \(newest)", path: layout.checkpoints)
            }
            state = contents.state
            firstSegment = newest
        }

        var segments = try fileSystem.contents(of: layout.wal).compactMap(WALFormat.number(fromFileName:)).sorted()
        // Numbers count up from 1, one per segment: the last one there can be is a forgery, and
        // would leave no number for the next segment. Refused before anything is deleted.
        let highest = max(firstSegment, segments.last ?? 0)
        guard highest < .max else {
            let path = highest == firstSegment ? layout.checkpoints + "/" + Checkpoint.fileName(highest) : layout.wal + "/" + WALFormat.fileName(highest)
            throw StoreError.corrupted("segment number \(highest) leaves none for the next segment", path: path)
        }
        if segments.contains(where: { $0 < firstSegment }) {
            // The checkpoint's name must be durable before the segments it replaces go: the checkpoint
            // that wrote it may have failed to sync its directory.
            try fileSystem.synchronizeDirectory(layout.checkpoints)
        }
        for obsolete in segments where obsolete < firstSegment {
            try fileSystem.remove(layout.wal + "/" + WALFormat.fileName(obsolete))  // a checkpoint already covers it
        }
        segments.removeAll { $0 < firstSegment }
        for (index, number) in segments.enumerated() where number != firstSegment + UInt64(index) {
            throw StoreError.corrupted("WAL segment \(WALFormat.fileName(firstSegment + UInt64(index))) is missing", path: layout.wal)
        }

        var replayed = 0
        var repair = PackRepair(directory: layout.packs, fileSystem: fileSystem)
        var olderSegments: [UInt64: UInt64] = [:]
        var lastSegment: WriteAheadLog.Segment?
        for number in segments {
            let path = layout.wal + "/" + WALFormat.fileName(number)
            let file = try fileSystem.open(path, flags: O_RDWR)
            let size = try file.size()
            guard size <= WALSegmentReader.maximumSegmentFileSize else {
                throw StoreError.corrupted("WAL segment is \(size) bytes, beyond any segment this store writes", path: path)
            }
            let bytes = try file.readExactly(Int(size), at: 0)
            let isLast = number == segments.last
            let result = try bytes.withUnsafeBytes { raw in
                try WALSegmentReader.read(raw, path: path, expectedNumber: number, isLast: isLast, limits: limits) { record, offset in
                    do {
                        try state.apply(record)
                    } catch {
                        throw StoreError.corrupted("WAL record cannot be applied: \(error)", path: path, offset: UInt64(offset))
                    }
                    replayed += 1
                    if case .packBytes(let logged) = record { try repair.restore(logged) }
                }
            }
            if isLast {
                if result.validLength < WALFormat.headerSize {
                    lastSegment = try WriteAheadLog.createSegment(number: number, salt: .random(in: 0 ... .max), in: layout.wal, fileSystem: fileSystem)
                } else {
                    if UInt64(result.validLength) < size {
                        // The zeros written ahead of the log, or the torn tail of an unacknowledged write. Cut rather
                        // than kept, so nothing beyond the batches appended from here on can ever be read as a frame.
                        try file.truncate(to: UInt64(result.validLength))
                    }
                    // What a crashed process left in the page cache becomes durable before new batches claim it is.
                    // The bytes after the last sync point's claim are written again first: if the sync that should
                    // have covered them failed, the kernel may hold them as clean pages that no sync will ever
                    // write, and the new batches' sync points would then vouch for bytes the disk never got.
                    let unsynced = result.durableClaim ..< result.validLength
                    if !unsynced.isEmpty {
                        try bytes.withUnsafeBytes { try file.write(UnsafeRawBufferPointer(rebasing: $0[unsynced]), at: UInt64(unsynced.lowerBound)) }
                    }
                    try file.synchronizeData()
                    let length = UInt64(result.validLength)
                    lastSegment = WriteAheadLog.Segment(
                        number: number, file: file, salt: result.header.salt, size: length, durableSize: length, allocatedSize: length)
                }
            } else {
                olderSegments[number] = size
            }
        }
        // The packs hold what the replayed log says they do, durably, before anything relies on it.
        try repair.finish()
        let segment: WriteAheadLog.Segment
        if let lastSegment {
            // The entries of the segments replayed (an earlier process may have failed before syncing them).
            try fileSystem.synchronizeDirectory(layout.wal)
            segment = lastSegment
        } else {
            segment = try WriteAheadLog.createSegment(number: firstSegment, salt: .random(in: 0 ... .max), in: layout.wal, fileSystem: fileSystem)
        }
        return Recovered(
            state: state, segment: segment, olderSegments: olderSegments, replayedRecords: replayed,
            packsRestored: repair.packsWritten, firstNewPackID: repair.firstNewPackID)
    }
}
