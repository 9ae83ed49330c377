/// The in-memory blob index: digest → entry, plus what collection and statistics need without a
/// scan: the set of unreferenced blobs (so collection costs follow the garbage, not the store) and
/// running byte totals.
struct BlobIndex: Sendable {
    /// A ``DigestTable`` rather than a Dictionary: ~60 bytes per blob instead of 75–150.
    private(set) var entries = DigestTable<BlobEntry>()
    /// Blobs whose count is zero: the only candidates for collection.
    private(set) var unreferenced: Set<Digest> = []
    /// Uncompressed bytes of the blobs that hold content: a chunked blob counts through its
    /// (deduplicated) chunks, so its bytes count once however many versions share them; manifest
    /// nodes count nothing.
    private(set) var logicalBytes: UInt64 = 0
    /// Σ over record references of the referenced blob's size: the bytes the records reference,
    /// counting every reference (over ``logicalBytes`` of the referenced blobs, the deduplication
    /// ratio). References that manifest nodes hold to their children are not in it.
    private(set) var referencedLogicalBytes: UInt64 = 0
    /// The size of each chunked blob, by its content digest: its root node's entry says nothing
    /// about it, and the size may pass 4 GiB. The presence of a digest here marks a root node.
    private(set) var manifestSizes: [Digest: UInt64] = [:]
    /// Bytes of live entries (headers included) per pack, to find packs worth rewriting.
    private(set) var liveBytesByPack: [UInt32: UInt64] = [:]
    /// Entries that are manifest nodes (of chunked blobs): none, and collection need not look for them.
    private(set) var manifestNodeCount = 0

    init() {}

    /// An empty index about to restore `count` entries from a checkpoint (``restore(_:_:)``), sized
    /// for them at once (no growth on the way) plus ``restoringHeadroom(_:)``, and keyed with `seed`,
    /// the seed of the index the checkpoint saved, so the entries arrive in the table's own order.
    init(restoringCapacity count: Int, seed: UInt64) {
        entries = DigestTable(seed: seed)
        entries.reserveCapacity(count + Self.restoringHeadroom(count))
    }

    /// Room a restored index keeps beyond its entries: one growth step of the table, at least 1,024.
    /// Sized exactly, the first put after an open would grow it, a sweep of the whole table (60 MB
    /// at a million blobs) in the put's latency; with this room, the next 5% of the store's blobs
    /// are put first (50,000 at a million), for 5% more memory the table would take at its next step anyway.
    static func restoringHeadroom(_ count: Int) -> Int {
        max(1024, Int(Double(count) * (DigestTable<BlobEntry>.growthFactor - 1)))
    }

    /// Adds an entry a checkpoint saved.
    mutating func restore(_ digest: Digest, _ entry: BlobEntry) {
        add(digest, entry)
    }

    /// Completes a restored index with what the entries alone cannot give: the sizes of its chunked
    /// blobs, and the referenced bytes (a count mixes record references with those of manifest nodes).
    mutating func finishRestoring(manifestSizes: [Digest: UInt64], referencedLogicalBytes: UInt64) {
        self.manifestSizes = manifestSizes
        self.referencedLogicalBytes = referencedLogicalBytes
    }

    var count: Int { entries.count }

    /// How many keys ahead a loop over many digests starts loading their index memory
    /// (``prefetch(after:in:)``): enough misses in flight to overlap, few enough to stay in cache.
    static let prefetchDistance = 8

    /// In a loop over `digests`, at `position`: starts loading the index memory of the digest
    /// ``prefetchDistance`` further on. Collection's loops call it so that their cache misses
    /// overlap: in a large index nearly every entry they visit misses, and without it a collection
    /// of the same garbage costs more the larger the store.
    @inline(__always)
    func prefetch(after position: Int, in digests: [Digest]) {
        let ahead = position + Self.prefetchDistance
        if ahead < digests.count { entries.prefetch(digests[ahead]) }
    }

    subscript(digest: Digest) -> BlobEntry? { entries[digest] }

    /// Starts fetching the memory a lookup of `digest` reads (``DigestTable/prefetch(_:)``).
    func prefetch(_ digest: Digest) { entries.prefetch(digest) }

    /// Records a blob written to a pack, or moved to another: a new blob starts unreferenced.
    mutating func place(_ placement: LogRecord.BlobPlacement) {
        if var entry = entries[placement.digest] {
            unaccount(entry)
            entry.setLocation(placement.location, compressed: placement.compressed, manifest: placement.manifest)
            entry.storedLength = placement.storedLength
            entries[placement.digest] = entry
            account(entry)
        } else {
            add(placement.digest, BlobEntry(
                location: placement.location, compressed: placement.compressed, manifest: placement.manifest, rawLength: placement.rawLength,
                storedLength: placement.storedLength, refCount: 0, zeroSince: placement.time))
        }
    }

    @discardableResult
    mutating func remove(_ digest: Digest) -> BlobEntry? {
        guard let entry = entries.removeValue(forKey: digest) else { return nil }
        unaccount(entry)
        removeFromUnreferenced(digest)
        manifestSizes[digest] = nil
        return entry
    }

    /// Marks a root manifest node placed by ``place(_:)`` as a chunked blob of `size` bytes.
    mutating func setManifestSize(_ size: UInt64, of digest: Digest) {
        manifestSizes[digest] = size
    }

    /// The bytes a blob holds for a caller: a chunked blob's whole size, a plain blob's length,
    /// nothing for an inner manifest node (no caller sees its digest).
    func size(of digest: Digest, _ entry: BlobEntry) -> UInt64 {
        manifestSizes[digest] ?? (entry.isManifest ? 0 : UInt64(entry.rawLength))
    }

    /// Restarts the grace period of a blob that was put again. A referenced blob keeps the time too:
    /// a manifest node that is collected passes its time to the children it releases (at least this
    /// one), so a chunk put again while only a dying manifest referenced it keeps its grace period.
    mutating func freshen(_ digest: Digest, time: UInt32) {
        guard var entry = entries[digest] else { return }
        entry.zeroSince = max(entry.zeroSince, time)
        entries[digest] = entry
    }

    /// Adds `delta` to a blob's count. Returns false (changing nothing) if the blob is unknown or
    /// the count would leave 0...UInt32.max. `fromRecords` is false for the references of manifest
    /// nodes, which ``referencedLogicalBytes`` leaves out.
    mutating func adjustReferences(of digest: Digest, by delta: Int, time: UInt32, fromRecords: Bool = true) -> Bool {
        guard var entry = entries[digest] else { return false }
        let updated = Int(entry.refCount) + delta
        guard updated >= 0, updated <= Int(UInt32.max) else { return false }
        entry.refCount = UInt32(updated)
        // Wrapping: exact for any real store, and a forged checkpoint's absurd counts cannot trap.
        if fromRecords {
            let change = UInt64(delta.magnitude) &* size(of: digest, entry)
            referencedLogicalBytes = delta >= 0 ? referencedLogicalBytes &+ change : referencedLogicalBytes &- change
        }
        if updated == 0 {
            entry.zeroSince = time
            unreferenced.insert(digest)
        } else {
            removeFromUnreferenced(digest)
        }
        entries[digest] = entry
        return true
    }

    /// The set grows to hold every blob unreferenced at once (each is, between its put and the
    /// commit that references it: a bulk load passes the whole store through it) and never shrinks
    /// by itself; rebuilt once three quarters of it are empty room, it costs what it holds
    /// (amortised O(1) per removal).
    private mutating func removeFromUnreferenced(_ digest: Digest) {
        guard unreferenced.remove(digest) != nil else { return }
        guard unreferenced.capacity > 1024, unreferenced.count < unreferenced.capacity / 4 else { return }
        var compact = Set<Digest>(minimumCapacity: unreferenced.count * 2)
        for digest in unreferenced { compact.insert(digest) }
        unreferenced = compact
    }

    private mutating func add(_ digest: Digest, _ entry: BlobEntry) {
        entries[digest] = entry
        if entry.refCount == 0 { unreferenced.insert(digest) }
        account(entry)
    }

    private mutating func account(_ entry: BlobEntry) {
        // Running totals in wrapping arithmetic: exact for any real store (they could not overflow),
        // while a forged checkpoint (checksums intact, counts absurd) cannot trap the process.
        logicalBytes &+= entry.contentLength
        liveBytesByPack[entry.location.pack, default: 0] += entry.entryLength
        if entry.isManifest { manifestNodeCount += 1 }
    }

    private mutating func unaccount(_ entry: BlobEntry) {
        logicalBytes &-= entry.contentLength
        if entry.isManifest { manifestNodeCount -= 1 }
        let pack = entry.location.pack
        let remaining = liveBytesByPack[pack, default: 0] - entry.entryLength
        liveBytesByPack[pack] = remaining == 0 ? nil : remaining
    }
}
