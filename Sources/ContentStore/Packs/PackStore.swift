#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Append-only pack files under `<store>/packs`.
///
/// One pack is active at a time; entries are appended to it under a short lock (compression and
/// hashing happened before), and it is sealed with a trailing index once it passes the size target.
/// Appends become durable before the WAL syncs a record that refers to them: the WAL either carries
/// the bytes appended since the last sync (``prepareCommit(loggingUpTo:)``, when they are few) or has
/// the packs synced first (``synchronize(_:)``). ``synchronize()`` syncs every pack: what a checkpoint
/// needs before the segments carrying pack bytes go.
///
/// Owns, besides: a pack's kept tail (``State/tails``) is exactly its bytes from where its unlogged
/// bytes start to its end, so a commit carries them from memory; any append or sync that would
/// leave it otherwise drops it, and the commit then reads the bytes back from the file.
///
/// And the deferred write (``State/deferred``): a small append whose bytes the kept tail holds is not
/// written to the file at once; the active pack's last bytes, at most ``tailLimit``, wait in memory
/// and reach the file in one `pwrite` for many puts. Deferred bytes are always the end of the active
/// pack and always either in the kept tail or already logged (carried by a batch), so a commit never
/// needs them from the file. They are written before anything reads or syncs the file: a reader's
/// ``file(_:)``, a sync (``synchronize()``, a commit that syncs instead of carrying, sealing), a batch
/// that is not synced (``writeDeferred()``), and before an append that they could not precede in
/// memory. A write that fails keeps them and throws: they are never dropped unwritten except with
/// their pack (``remove(_:)``) or the store (``close()``), and the WAL still carries every one a
/// commit relied on until a sync that follows their write lets a checkpoint drop it.
final class PackStore: Sendable {
    let directory: String
    private let sizeTarget: UInt64
    private let fileSystem: FileSystem

    struct Active {
        var id: UInt32
        var file: File
        var size: UInt64
        var index: [PackFormat.IndexEntry]
        /// Bytes before this were handed to write-back (``PackStore/writeBackStep``).
        var writeBackStart: UInt64
        /// Offsets of the dictionaries written into this pack, by digest.
        var dictionaries: [Digest: UInt64] = [:]
    }

    /// Appended bytes are handed to the kernel's write-back in steps of this size, outside the lock,
    /// so the sync that makes them durable (a commit's, or sealing's) finds most of them on their way
    /// to the disk instead of starting all of the writing then, with every committer waiting.
    static let writeBackStep: UInt64 = 1 << 20
    /// A lone entry larger than this is written in place, header and payload separately; smaller
    /// ones are copied together, since a system call costs more than copying a few KiB.
    static let largeEntry: UInt64 = 64 << 10

    struct State {
        var files: [UInt32: File] = [:]
        var sizes: [UInt32: UInt64] = [:]
        var active: Active?
        var nextID: UInt32 = 1
        var unsynced: [UInt32: File] = [:]
        /// For each pack in `unsynced`: where the bytes neither synced nor carried by the WAL start.
        /// A pack created since its last sync starts at 0, header included.
        var unlogged: [UInt32: UInt64] = [:]
        var directoryNeedsSync = false
        /// Set when a sync failed: the kernel may have dropped the unsynced pages, so no later sync may
        /// be taken as covering them ("fsyncgate"). Appends and syncs throw it until the store is reopened.
        var failure: StoreError?
        /// Appends per pack whose placement the caller has not yet put in the index (``settle(_:)``).
        var unsettled: [UInt32: Int] = [:]
        /// For a pack in `unlogged`: a copy of its bytes from there to its end, when all of them were
        /// appended since and come to at most ``tailLimit``. A commit carries them without a `pread`
        /// of what was just written (a small put's commit otherwise pays that system call).
        var tails: [UInt32: [UInt8]] = [:]
        /// The active pack's bytes from `offset` to its end, appended but not yet written to its file.
        var deferred: Deferred?

        /// Marks `pack`'s appends synced: nothing of it is left to carry.
        mutating func synced(_ pack: UInt32) {
            unsynced[pack] = nil
            unlogged[pack] = nil
            tails[pack] = nil
        }
    }

    /// Bytes of the active pack not yet in its file (``State/deferred``).
    struct Deferred {
        var pack: UInt32
        var file: File
        var offset: UInt64
        var bytes: [UInt8]
    }

    /// The most bytes a pack's kept tail holds (``State/tails``): more than a few small puts' worth
    /// is a large put's, whose commit reads them back (one system call against the copying of many KiB).
    static let tailLimit = 64 << 10

    /// Internal rather than private for tests alone, which seal the active pack from their own target.
    let state: Mutex<State>

    /// Opens every pack in `directory` for reading. Opening lists the directory and stats each file;
    /// it reads no entries.
    /// New packs are numbered from `firstNewID` at least: recovery passes one more than every pack the
    /// replayed WAL carries bytes for, so a pack collection deleted never returns under its old number
    /// for a later recovery to write those bytes into.
    init(directory: String, sizeTarget: UInt64, fileSystem: FileSystem, firstNewID: UInt32 = 1) throws {
        self.directory = directory
        self.sizeTarget = sizeTarget
        self.fileSystem = fileSystem
        var initial = State()
        initial.nextID = max(1, firstNewID)
        for name in try fileSystem.contents(of: directory) {
            guard let id = PackFormat.id(fromFileName: name) else { continue }
            let file = try fileSystem.open(directory + "/" + name, flags: O_RDONLY)
            initial.files[id] = file
            initial.sizes[id] = try file.size()
            initial.nextID = max(initial.nextID, id &+ 1)
        }
        state = Mutex(initial)
    }

    var packIDs: [UInt32] { state.withLock { Array($0.files.keys).sorted() } }
    var totalBytes: UInt64 { state.withLock { $0.sizes.values.reduce(0, +) } }
    var activePackID: UInt32? { state.withLock { $0.active?.id } }

    func size(of pack: UInt32) -> UInt64? { state.withLock { $0.sizes[pack] } }
    /// The file of `pack` for reading: its deferred bytes are written first, so every byte below its
    /// size can be read from the file (a write that fails is thrown, and the bytes stay deferred).
    func file(_ pack: UInt32) throws -> File? {
        try state.withLock { state in
            if state.deferred?.pack == pack { try Self.writeDeferred(&state) }
            return state.files[pack]
        }
    }

    /// Writes the deferred bytes to their file: what a batch not synced needs before it is written, so
    /// that a process killed afterwards leaves in the file what its records refer to.
    func writeDeferred() throws {
        try state.withLock { try Self.writeDeferred(&$0) }
    }

    /// Writes `state.deferred` with one `pwrite` and forgets it; on failure it stays (a retry writes
    /// the same bytes at the same offset) and the error is thrown.
    private static func writeDeferred(_ state: inout State) throws {
        guard let deferred = state.deferred else { return }
        try deferred.file.write(deferred.bytes, at: deferred.offset)
        state.deferred = nil
    }
    func path(of pack: UInt32) -> String { directory + "/" + PackFormat.fileName(pack) }

    /// Appends entries in order and returns where each landed. The entries that go into one pack are
    /// written with one `pwrite` (a chunked put appends thousands of small entries: two system calls
    /// each cost more than copying them together); a lone entry is written in place, uncopied: with
    /// one `pwrite` when its payload has room for the header in front (``PackEntry/Payload/framed(_:)``),
    /// else with two when it is large (``largeEntry``).
    func append(_ entries: [PackEntry]) throws -> [BlobLocation] {
        var writeBacks: [(file: File, offset: UInt64, length: UInt64)] = []
        let locations = try state.withLock { state -> [BlobLocation] in
            if let failure = state.failure { throw failure }
            var locations: [BlobLocation] = []
            locations.reserveCapacity(entries.count)
            do {
                try appendGroups(entries, &locations, &writeBacks, &state)
            } catch {
                // The caller gets no locations to settle: the entries already written are dead space.
                for location in locations { Self.settle(location.pack, &state) }
                throw error
            }
            return locations
        }
        for writeBack in writeBacks { writeBack.file.startWriteBack(offset: writeBack.offset, length: writeBack.length) }
        return locations
    }

    private func appendGroups(_ entries: [PackEntry], _ locations: inout [BlobLocation],
                              _ writeBacks: inout [(file: File, offset: UInt64, length: UInt64)], _ state: inout State) throws {
        while locations.count < entries.count {
            var active = try activePack(&state, forAppending: entries[locations.count].length)
            // Taken out of the state so `active.index` is uniquely referenced and grows in place;
            // otherwise every append would copy the whole index.
            state.active = nil
            defer { state.active = active }
            let group = Self.group(entries[locations.count...], fitting: active, sizeTarget: sizeTarget)
            let first = active.size
            var tail = Self.takeTail(of: active.id, appendingAt: first, &state)
            // Put back however this ends: a write that fails leaves the pack, and so its tail, as they were.
            defer { if let tail { state.tails[active.id] = tail } }
            let offsets: [UInt64]
            if let kept = tail?.count, try Self.canDefer(group, after: kept, to: active, &state) {
                // Taken out of the state, so the bytes are uniquely referenced and grow in place.
                var deferred = state.deferred.take() ?? Deferred(pack: active.id, file: active.file, offset: first, bytes: [])
                defer { state.deferred = deferred }
                let start = deferred.bytes.count
                offsets = try Self.write(group, to: &active, writing: false) { deferred.bytes.append(contentsOf: $0) }
                tail!.append(contentsOf: deferred.bytes[start...])  // in place: the tail was taken out too
            } else {
                // Bytes written to the file go after the deferred ones, which therefore go first.
                try Self.writeDeferred(&state)
                offsets = try Self.write(group, to: &active, writing: true) { written in
                    guard tail != nil, tail!.count + written.count <= Self.tailLimit else {
                        tail = nil
                        return
                    }
                    tail!.append(contentsOf: written)
                }
            }
            for (entry, offset) in zip(group, offsets) {
                var indexEntry = entry.indexEntry
                indexEntry.offset = offset
                active.index.append(indexEntry)
                locations.append(BlobLocation(pack: active.id, offset: offset))
            }
            state.sizes[active.id] = active.size
            if state.unsynced.updateValue(active.file, forKey: active.id) == nil { state.unlogged[active.id] = first }
            state.unsettled[active.id, default: 0] += group.count
            if active.size - active.writeBackStart >= PackStore.writeBackStep {
                writeBacks.append((active.file, active.writeBackStart, active.size - active.writeBackStart))
                active.writeBackStart = active.size
            }
        }
    }

    /// Whether `group` may wait in memory after the deferred bytes: small enough for the kept tail
    /// (`kept` bytes) to hold it too, so a commit carries it without reading the file. Deferred bytes that
    /// `group` would take over ``tailLimit`` are written first, and the group starts the next ones.
    private static func canDefer(_ group: ArraySlice<PackEntry>, after kept: Int, to active: Active, _ state: inout State) throws -> Bool {
        let length = group.reduce(0) { $0 + Int($1.length) + ($1.dictionaryUse.map { $0.dictionary.entry.count } ?? 0) }
        guard kept + length <= tailLimit else { return false }
        if let deferred = state.deferred,
           deferred.pack != active.id || deferred.offset + UInt64(deferred.bytes.count) != active.size || deferred.bytes.count + length > tailLimit {
            try writeDeferred(&state)
        }
        return true
    }

    /// What of `pack`'s kept tail an append at `offset` continues (empty when its unlogged bytes start
    /// there), taken out of the state; nil when the tail is not kept: the append then keeps none.
    private static func takeTail(of pack: UInt32, appendingAt offset: UInt64, _ state: inout State) -> [UInt8]? {
        let tail = state.tails.removeValue(forKey: pack)
        guard state.unsynced[pack] != nil else { return [] }  // the append starts the unlogged bytes
        guard let start = state.unlogged[pack] else { return nil }
        if start == offset { return [] }
        guard let tail, start + UInt64(tail.count) == offset else { return nil }
        return tail
    }

    /// The leading entries that fit in `active` (at least one: an empty pack takes any entry), with
    /// the dictionaries they need that the pack lacks.
    private static func group(_ entries: ArraySlice<PackEntry>, fitting active: Active, sizeTarget: UInt64) -> ArraySlice<PackEntry> {
        // Only dictionaries the pack lacks go in: a pack that has its dictionary (every small put
        // but a pack's first) makes no set, whose storage would be an allocation per put.
        var added = Set<Digest>()
        func missing(_ entry: PackEntry) -> ChunkDictionary? {
            guard let dictionary = entry.dictionaryUse?.dictionary, active.dictionaries[dictionary.digest] == nil,
                  !added.contains(dictionary.digest)
            else { return nil }
            return dictionary
        }
        func length(_ entry: PackEntry) -> UInt64 {
            entry.length + UInt64(missing(entry)?.entry.count ?? 0)
        }
        func take(_ entry: PackEntry) {
            if let dictionary = missing(entry) { added.insert(dictionary.digest) }
        }
        var end = entries.startIndex + 1
        var size = active.size + length(entries[entries.startIndex])
        take(entries[entries.startIndex])
        while end < entries.endIndex, size + length(entries[end]) <= sizeTarget {
            size += length(entries[end])
            take(entries[end])
            end += 1
        }
        return entries[..<end]
    }

    /// Writes `group` at the end of `active` (to its file when `writing`, else only to `written`), each
    /// dictionary an entry uses before it when the pack lacks it, and returns the entries' offsets;
    /// `written` is given the bytes of each write, in order. `active` learns of the dictionaries only
    /// once they are written.
    private static func write(_ group: ArraySlice<PackEntry>, to active: inout Active, writing: Bool,
                              written: (UnsafeRawBufferPointer) -> Void) throws -> [UInt64] {
        let start = active.size
        if group.count == 1, let entry = group.first, entry.dictionaryUse == nil {
            if case .framed(let buffer) = entry.payload {
                entry.header.withUnsafeBytes { buffer.copyMemory(from: $0) }
                if writing { try active.file.write(UnsafeRawBufferPointer(buffer), at: start) }
                written(UnsafeRawBufferPointer(buffer))
                active.size += entry.length
                return [start]
            }
            if writing, entry.length > PackStore.largeEntry {
                try active.file.write(entry.header, at: start)
                try entry.payload.withUnsafeBytes { try active.file.write($0, at: start + UInt64(entry.header.count)) }
                entry.header.withUnsafeBytes(written)
                entry.payload.withUnsafeBytes(written)
                active.size += entry.length
                return [start]
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(group.reduce(0) { $0 + $1.length }))
        var added: [Digest: UInt64] = [:]
        var offsets: [UInt64] = []
        for entry in group {
            var dictionaryOffset: UInt64 = 0
            if let dictionary = entry.dictionaryUse?.dictionary {
                if let written = active.dictionaries[dictionary.digest] ?? added[dictionary.digest] {
                    dictionaryOffset = written
                } else {
                    dictionaryOffset = start + UInt64(bytes.count)
                    added[dictionary.digest] = dictionaryOffset
                    bytes.append(contentsOf: dictionary.entry)
                }
            }
            offsets.append(start + UInt64(bytes.count))
            bytes.append(contentsOf: entry.encodedHeader(dictionaryOffset: dictionaryOffset))
            entry.payload.withUnsafeBytes { bytes.append(contentsOf: $0) }
        }
        if writing { try active.file.write(bytes, at: start) }
        bytes.withUnsafeBytes(written)
        active.size += UInt64(bytes.count)
        active.dictionaries.merge(added) { written, _ in written }
        return offsets
    }

    /// Tells the store that an entry ``append(header:payload:indexEntry:)`` wrote is now in the
    /// index (or was found redundant). Every append must be settled exactly once.
    func settle(_ pack: UInt32) {
        state.withLock { Self.settle(pack, &$0) }
    }

    private static func settle(_ pack: UInt32, _ state: inout State) {
        let remaining = state.unsettled[pack, default: 1] - 1
        state.unsettled[pack] = remaining > 0 ? remaining : nil
    }

    /// Whether entries were appended to `pack` that the index may not know yet. Collection judges a
    /// pack by the index only when this is false; appends go to the active pack only, so once a pack
    /// is no longer active and this is false, it stays false.
    func hasUnsettledAppends(_ pack: UInt32) -> Bool {
        state.withLock { $0.unsettled[pack] != nil }
    }

    /// Chooses, for a WAL batch about to be synced, how the appends it may refer to become durable:
    /// when the bytes appended since they were last synced or logged come to at most `limit`, the
    /// batch carries them (one sync per commit instead of two); otherwise their packs are synced
    /// first. The caller holds the WAL lock, so every record in the batch was logged after its append.
    /// The directory is synced either way when a pack was created: recovery writes bytes back only
    /// into a pack that exists.
    func prepareCommit(loggingUpTo limit: Int) throws -> PackCommitPlan {
        let unlogged = try state.withLock { state in
            if let failure = state.failure { throw failure }
            let unlogged = state.unsynced.compactMap { pack, file -> (pack: UInt32, file: File, range: Range<UInt64>, kept: [UInt8]?)? in
                let end = state.sizes[pack] ?? 0
                let start = state.unlogged[pack] ?? 0  // unknown: carry or sync the whole pack
                let kept = state.tails[pack].flatMap { $0.count == end - start ? $0 : nil }
                return start < end ? (pack, file, start ..< end, kept) : nil
            }
            // Bytes to be read back or synced must be in the file (kept ones are carried from memory).
            let total = unlogged.reduce(0) { $0 + $1.range.count }
            if let deferred = state.deferred, total > UInt64(limit) || unlogged.contains(where: { $0.pack == deferred.pack && $0.kept == nil }) {
                try Self.writeDeferred(&state)
            }
            return unlogged
        }
        var result = PackCommitPlan()
        // Bytes below a pack's size are written and never change, so they are read without the lock.
        if unlogged.reduce(0, { $0 + $1.range.count }) <= UInt64(limit) {
            for tail in unlogged {
                if let bytes = tail.kept ?? (try? tail.file.readExactly(tail.range.count, at: tail.range.lowerBound)) {
                    result.logged.append(LogRecord.PackBytes(pack: tail.pack, offset: tail.range.lowerBound, bytes: bytes))
                } else {
                    result.files.append(tail.file)  // a sync makes them durable as well
                }
            }
        } else {
            result.files = unlogged.map(\.file)
        }
        let synced = Set(result.files.map(ObjectIdentifier.init))
        try state.withLock { state in
            for logged in result.logged where state.unlogged[logged.pack] == logged.offset {
                state.unlogged[logged.pack] = logged.offset + UInt64(logged.bytes.count)
                // What was appended meanwhile stays kept; the logged bytes are no longer needed.
                if let tail = state.tails.removeValue(forKey: logged.pack), tail.count > logged.bytes.count {
                    state.tails[logged.pack] = Array(tail[logged.bytes.count...])
                }
            }
            for (pack, file) in state.unsynced where synced.contains(ObjectIdentifier(file)) {
                // Appended since the first look, and about to be taken as covered by the sync.
                if state.deferred?.pack == pack { try Self.writeDeferred(&state) }
                state.synced(pack)
            }
            result.directory = state.directoryNeedsSync
            state.directoryNeedsSync = false
        }
        return result
    }

    /// Syncs what ``prepareCommit(loggingUpTo:)`` chose to sync.
    func synchronize(_ commit: PackCommitPlan) throws {
        try synchronize(commit.files, directory: commit.directory)
    }

    /// `fdatasync`s every pack written since it was last synced, then the directory if a pack was created.
    func synchronize() throws {
        let (files, directoryNeedsSync) = try state.withLock { state in
            if let failure = state.failure { throw failure }
            try Self.writeDeferred(&state)
            defer { state.unsynced = [:]; state.unlogged = [:]; state.tails = [:]; state.directoryNeedsSync = false }
            return (Array(state.unsynced.values), state.directoryNeedsSync)
        }
        try synchronize(files, directory: directoryNeedsSync)
    }

    private func synchronize(_ files: [File], directory directoryNeedsSync: Bool) throws {
        // A failure is not retried as if the data were safe (Docs/durability.md).
        do {
            for file in files { try file.synchronizeData() }
            if directoryNeedsSync { try fileSystem.synchronizeDirectory(directory) }
        } catch {
            state.withLock { $0.failure = PackStore.failure(error) }
            throw error
        }
    }

    private static func failure(_ error: any Error) -> StoreError {
        (error as? StoreError).map {
            StoreError(code: $0.code, message: "a pack failed to sync; reopen the store: \($0.message)", path: $0.path, cause: $0.cause)
        } ?? StoreError(code: .io, message: "a pack failed to sync; reopen the store", cause: error)
    }

    /// Unlinks a pack. The caller has made durable the state that no longer needs it.
    func remove(_ pack: UInt32) throws {
        state.withLock { state in
            if state.active?.id == pack { state.active = nil }
            if state.deferred?.pack == pack { state.deferred = nil }
            state.files[pack] = nil
            state.sizes[pack] = nil
            state.synced(pack)
        }
        try fileSystem.remove(path(of: pack))
    }

    /// Drops every descriptor. Appends after this fail.
    func close() {
        state.withLock { state in
            state.active = nil
            state.files = [:]
            state.unsynced = [:]
            state.unlogged = [:]
            state.tails = [:]
            state.deferred = nil
        }
    }

    private func activePack(_ state: inout State, forAppending length: UInt64) throws -> Active {
        if let active = state.active {
            let isEmpty = active.size == UInt64(PackFormat.headerSize)
            if isEmpty || active.size + length <= sizeTarget { return active }
            try seal(active, in: &state)
        }
        let id = state.nextID
        let path = path(of: id)
        let file = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_EXCL)
        // The name is used up even if the header cannot be written (a full disk): the next try takes
        // a new one rather than failing on this file for as long as the process runs. An empty or
        // headerless pack holds nothing live, and collection deletes it.
        state.nextID = id &+ 1
        let created = UInt64(max(0, time(nil))) * 1000
        let header = PackFormat.header(id: id, createdMilliseconds: created)
        try file.write(header, at: 0)
        state.files[id] = file
        state.sizes[id] = UInt64(PackFormat.headerSize)
        state.unsynced[id] = file
        state.unlogged[id] = 0
        state.tails[id] = header
        state.directoryNeedsSync = true
        return Active(id: id, file: file, size: UInt64(PackFormat.headerSize), index: [], writeBackStart: 0)
    }

    func seal(_ active: Active, in state: inout State) throws {
        try Self.writeDeferred(&state)
        let trailer = PackFormat.trailer(active.index, indexOffset: active.size)
        try active.file.write(trailer, at: active.size)
        do {
            try active.file.synchronizeData()
        } catch {
            state.failure = PackStore.failure(error)
            throw error
        }
        state.sizes[active.id] = active.size + UInt64(trailer.count)
        state.synced(active.id)
        state.active = nil
    }
}
