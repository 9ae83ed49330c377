import Foundation

extension LocalEngine {
    /// Removes blobs that have been unreferenced for at least the grace period, then rewrites packs
    /// whose dead fraction passes the threshold and deletes packs with nothing live.
    ///
    /// Safe while other threads put, read and write:
    /// - the decision to remove a blob is made (again) under the lock that commits take, so a blob
    ///   that a commit referenced or a put freshened since the candidates were listed is kept, and a
    ///   later commit that references a removed blob fails with `missingBlob` instead of dangling;
    /// - blobs that a live ``Snapshot`` may still read are spared;
    /// - the index change that drops or moves blobs is durable in the WAL before any pack file is
    ///   deleted, and a pack is judged only once every entry appended to it is in the index.
    ///
    /// A crash anywhere inside leaves a store that opens with nothing referenced lost; what was not
    /// finished is garbage the next collection removes. Work is proportional to the garbage: only
    /// unreferenced blobs, the list of packs and the packs being rewritten are visited, never the
    /// whole index. Locks are held for short batches, never for the whole run.
    ///
    /// The grace period is measured in whole seconds of ``Configuration/now``: a blob is removed
    /// once it has been unreferenced for at least the grace period (and at most a second more).
    /// A grace period of zero removes every unreferenced blob no snapshot can see.
    ///
    /// - Throws: `invalidArgument` for a negative grace period or a rewrite threshold outside
    ///   (0, 1]; `closed` if the store is closed meanwhile; I/O errors. A pack whose entries are
    ///   damaged is left in place (and counted in ``GarbageCollectionReport/packsSkipped``).
    func collectGarbage(_ options: GarbageCollectionOptions = .init()) throws -> GarbageCollectionReport {
        try collectGarbage(options, progress: nil)
    }

    /// ``collectGarbage(_:)``, calling `progress` on the calling thread as the work advances.
    func collectGarbage(
        _ options: GarbageCollectionOptions, progress: ((MaintenanceProgress) -> Void)?
    ) throws -> GarbageCollectionReport {
        try checkOpen()
        let grace = options.gracePeriod ?? configuration.garbageGracePeriod
        guard grace >= .zero else { throw StoreError.invalidArgument("the grace period is negative") }
        let threshold = options.packRewriteThreshold ?? configuration.packRewriteThreshold
        guard threshold > 0, threshold <= 1 else {
            throw StoreError.invalidArgument("the pack rewrite threshold \(threshold) is outside (0, 1]")
        }
        let started = ContinuousClock.now
        var report = try maintenance.withLock { _ in
            var report = GarbageCollectionReport(dryRun: options.dryRun)
            let dropped = try dropExpiredBlobs(grace: grace, dryRun: options.dryRun, report: &report, progress: progress)
            try compactPacks(threshold: threshold, pretendingDropped: options.dryRun ? dropped : [:], dryRun: options.dryRun,
                             report: &report, progress: progress)
            return report
        }
        report.duration = ContinuousClock.now - started
        noteCollection(report)
        logger.info(options.dryRun ? "garbage collection dry run" : "garbage collected", metadata: [
            "blobs": "\(report.blobsRemoved)", "bytesFreed": "\(report.bytesFreed)",
            "packsRewritten": "\(report.packsRewritten)", "packsDeleted": "\(report.packsDeleted)",
            "bytesReclaimed": "\(report.bytesReclaimed)", "duration": "\(report.duration)",
        ])
        return report
    }

    /// Blobs are checked and dropped this many at a time, each batch under one short hold of the lock.
    static let collectionBatchSize = 4096
    /// Placements of moved blobs per WAL record: 3.7 MB of record at most, whatever a pack holds.
    static let movesPerRecord = 65536

    /// Whether a blob unreferenced since `zeroSince` has been so for at least `grace` at `now`.
    ///
    /// Both times are whole seconds rounded down, so the true elapsed time exceeds
    /// `now - zeroSince - 1`; requiring that to reach the grace period (rounded up) never removes a
    /// blob early. A clock behind `zeroSince` (stepped back, or another machine) removes nothing.
    static func hasExpired(zeroSince: UInt32, now: UInt32, grace: Duration) -> Bool {
        if grace == .zero { return true }
        let (seconds, attoseconds) = grace.components
        let graceSeconds = seconds + (attoseconds > 0 ? 1 : 0)
        return Int64(now) - Int64(zeroSince) - 1 >= graceSeconds
    }

    /// Phase 1: drops expired unreferenced blobs durably (unless a dry run). Returns the entry bytes
    /// dropped (or, in a dry run, that would be) per pack.
    private func dropExpiredBlobs(
        grace: Duration, dryRun: Bool, report: inout GarbageCollectionReport, progress: ((MaintenanceProgress) -> Void)?
    ) throws -> [UInt32: UInt64] {
        // Taken out as an array, costing what the garbage costs. Keeping a copy of the set instead
        // would share its storage, and the first drop below would then copy all of it: a set sized
        // for every blob ever unreferenced at once (each is, between its put and its commit).
        let candidates = try core.withLock { core in
            guard core.isOpen else { throw Store.closedError }
            return Array(core.state.blobs.unreferenced)
        }
        var droppedBytes: [UInt32: UInt64] = [:]
        var lastLSN: UInt64?
        var releasedChildren = false
        var pretendedDrops: [PretendedDrop] = []
        progress?(MaintenanceProgress(phase: .droppingBlobs, completed: 0, total: candidates.count))
        for start in stride(from: 0, to: candidates.count, by: LocalEngine.collectionBatchSize) {
            try CancellationToken.checkCancellation()  // between batches: earlier drops stand, the store is consistent
            let batch = Array(candidates[start ..< min(start + LocalEngine.collectionBatchSize, candidates.count)])
            let children = childrenOfManifestNodes(among: batch)
            let (chosen, lsn) = try core.withLock { core -> ([(digest: Digest, entry: BlobEntry)], UInt64?) in
                guard core.isOpen else { throw Store.closedError }
                // Decided under the lock commits and puts take: nothing can reference or freshen a blob
                // between this check and its removal from the index.
                let now = nowSeconds
                let horizon = commits.published.withLock { published in
                    [published.horizon, snapshots.oldest].compactMap { $0 }.min()
                }
                var digests: [Digest] = []
                var manifests: [LogRecord.ManifestDrop] = []
                var entries: [(digest: Digest, entry: BlobEntry)] = []
                for (position, digest) in batch.enumerated() {
                    core.state.blobs.prefetch(after: position, in: batch)
                    guard let entry = core.state.blobs[digest], entry.refCount == 0,
                          LocalEngine.hasExpired(zeroSince: entry.zeroSince, now: now, grace: grace),
                          // A snapshot (or a reader of records not yet published) may still see it referenced.
                          horizon.map({ entry.zeroSince < $0 }) ?? true
                    else { continue }
                    if entry.isManifest {
                        // A node whose children could not be read stays: dropping it would leave them counted.
                        guard let listed = children[digest] else { continue }
                        manifests.append(LogRecord.ManifestDrop(digest: digest, children: listed))
                    } else {
                        digests.append(digest)
                    }
                    entries.append((digest, entry))
                }
                guard !dryRun, !entries.isEmpty else { return (entries, nil) }
                var lsn: UInt64 = 0
                if !digests.isEmpty { lsn = try wal.append(.drop(time: now, digests: digests)) }
                if !manifests.isEmpty { lsn = try wal.append(.dropManifests(time: now, drops: manifests)) }
                do {
                    try core.state.drop(digests)
                    try core.state.drop(manifests: manifests)
                } catch {
                    // Every digest was checked under this lock, so this is a bug; the log has the record already.
                    throw StoreError(code: .corrupted, message: "collection could not drop blobs: \(error)")
                }
                return (entries, lsn)
            }
            if let lsn { lastLSN = lsn }
            report.blobsRemoved += chosen.count
            for (_, entry) in chosen {
                report.bytesFreed += entry.entryLength
                report.logicalBytesFreed += entry.contentLength
                droppedBytes[entry.location.pack, default: 0] += entry.entryLength
                releasedChildren = releasedChildren || entry.isManifest
            }
            if dryRun {
                pretendedDrops += chosen.compactMap { digest, entry in children[digest].map { PretendedDrop(zeroSince: entry.zeroSince, children: $0) } }
            }
            progress?(MaintenanceProgress(phase: .droppingBlobs, completed: start + batch.count, total: candidates.count))
        }
        // The drops must be durable before phase 2 deletes a pack that held the dropped blobs.
        if let lastLSN { try commits.flush(upTo: lastLSN, synchronously: true) }
        // Dropped manifest nodes released their children: those no other reference holds are garbage
        // of the same age (StoreState.drop(manifests:)), collected by another pass, one per tree level.
        if releasedChildren {
            // A dry run drops nothing, so no further pass would find the children unreferenced: it
            // works out what those passes would drop instead.
            let deeper = dryRun
                ? try pretendCascade(from: pretendedDrops, grace: grace, report: &report)
                : try dropExpiredBlobs(grace: grace, dryRun: dryRun, report: &report, progress: progress)
            droppedBytes.merge(deeper, uniquingKeysWith: +)
        }
        return droppedBytes
    }

    /// Phase 2: deletes packs with nothing live and rewrites packs that are mostly dead.
    private func compactPacks(
        threshold: Double, pretendingDropped: [UInt32: UInt64], dryRun: Bool, report: inout GarbageCollectionReport,
        progress: ((MaintenanceProgress) -> Void)?
    ) throws {
        // Packs are judged by the state in memory; what made them dead must be durable before any is
        // deleted (and a log that failed, holding changes that never reached the disk, stops here).
        if !dryRun { try commits.flush(upTo: wal.appendedLSN, synchronously: true) }
        // Listed before the active pack is read: appends go only to the active pack and new packs get
        // new ids, so a pack listed here and not active afterwards never receives another entry.
        let listed = packs.packIDs
        let active = packs.activePackID
        var removedAny = false
        var syncAttempted = false
        defer {
            // Unlinks are made durable together; a crash before that only leaves packs the next run deletes.
            // Best effort here only when an error is already on its way out; otherwise a failure is reported.
            if removedAny && !syncAttempted { try? fileSystem.synchronizeDirectory(layout.packs) }
        }
        progress?(MaintenanceProgress(phase: .compactingPacks, completed: 0, total: listed.count))
        for (index, pack) in listed.enumerated() {
            defer { progress?(MaintenanceProgress(phase: .compactingPacks, completed: index + 1, total: listed.count)) }
            try checkOpen()
            try CancellationToken.checkCancellation()
            // Entries still on their way into the index would look dead; judge the pack next time.
            guard pack != active, !packs.hasUnsettledAppends(pack), let size = packs.size(of: pack), let file = try packs.file(pack) else {
                continue
            }
            let indexed = core.withLock { $0.state.blobs.liveBytesByPack[pack] ?? 0 }
            let live = indexed - min(indexed, pretendingDropped[pack] ?? 0)
            if live == 0 {
                report.packsDeleted += 1
                report.bytesReclaimed += size
                if !dryRun {
                    try packs.remove(pack)
                    removedAny = true
                }
                continue
            }
            let header = UInt64(PackFormat.headerSize)
            // Dead bytes are entry bytes no index entry points at; a sealed pack's trailing index is
            // overhead, not garbage (counting it would rewrite packs of small blobs again and again).
            // The file size bounds the entry bytes from above, so most packs are passed over unread.
            guard Double(size - min(size, header + live)) >= threshold * Double(size - min(size, header)) else { continue }
            let entriesEnd = try PackReader.sealedIndexOffset(of: file, size: size) ?? size
            let entryBytes = entriesEnd - min(entriesEnd, header)
            guard entryBytes > 0, Double(entryBytes - min(entryBytes, live)) >= threshold * Double(entryBytes) else { continue }
            if dryRun {
                report.packsRewritten += 1
                report.packsDeleted += 1
                report.bytesCopied += live
                report.bytesReclaimed += size - min(size, live)
            } else if let copied = try rewrite(pack, file: file, entriesEnd: entriesEnd, report: &report) {
                report.packsRewritten += 1
                report.packsDeleted += 1
                report.bytesReclaimed += size - min(size, copied)
                removedAny = true
            } else {
                report.packsSkipped += 1
            }
        }
        if removedAny {
            syncAttempted = true
            try fileSystem.synchronizeDirectory(layout.packs)
        }
    }

    /// Copies a pack's live entries to the active pack, makes the move durable, then deletes the
    /// pack. Returns the bytes copied, or nil when the pack was kept because it is damaged.
    private func rewrite(_ pack: UInt32, file: File, entriesEnd: UInt64, report: inout GarbageCollectionReport) throws -> UInt64? {
        var appendedTo: [UInt32] = []
        // The copies are in no index until the move below; settle them only after it.
        defer { for target in appendedTo { packs.settle(target) } }
        var placements: [LogRecord.BlobPlacement] = []
        var copied: UInt64 = 0
        var scanner = PackEntryScanner(file: file, end: entriesEnd)
        while true {
            let (buffer, entries) = try scanner.next()
            guard !entries.isEmpty else { break }
            let live = try core.withLock { core in
                guard core.isOpen else { throw Store.closedError }
                return entries.filter { core.state.blobs[$0.header.digest]?.location == BlobLocation(pack: pack, offset: $0.offset) }
            }
            for entry in live {
                let location = try buffer.withUnsafeBytes { raw -> BlobLocation? in
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[entry.range])
                    let header = UnsafeRawBufferPointer(rebasing: bytes[..<PackFormat.entryHeaderSize])
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[PackFormat.entryHeaderSize...])
                    // Copying would spread damage and deleting would lose the blob: such a pack stays
                    // for `verify` to report.
                    guard PackFormat.checksumMatches(header: header, payload: payload) else { return nil }
                    guard entry.header.usesDictionary else {
                        return try packs.append(header: Array(header), payload: payload, indexEntry: PackFormat.IndexEntry(
                            digest: entry.header.digest, offset: 0, rawLength: entry.header.rawLength, storedLength: entry.header.storedLength))
                    }
                    // The frame moves unchanged; its dictionary moves with it (once per target pack).
                    let reference = payload.loadUnaligned(as: UInt64.self).littleEndian
                    guard reference < entry.offset,
                          let dictionary = try? self.dictionary(in: pack, file: file, at: reference)
                    else { return nil }
                    return try packs.append(digest: entry.header.digest, rawLength: entry.header.rawLength,
                                            frame: UnsafeRawBufferPointer(rebasing: payload[PackFormat.dictionaryReferenceSize...]),
                                            dictionary: dictionary, time: entry.header.time)
                }
                guard let location else {
                    logger.error("pack entry fails its checksum or its dictionary is damaged; pack not rewritten", metadata: [
                        "path": "\(file.path)", "offset": "\(entry.offset)", "digest": "\(entry.header.digest)",
                    ])
                    // The copies made so far are dead space in the active pack.
                    report.bytesCopied += copied
                    return nil
                }
                appendedTo.append(location.pack)
                copied += entry.header.totalLength
                placements.append(LogRecord.BlobPlacement(
                    digest: entry.header.digest, location: location, compressed: entry.header.isCompressed,
                    rawLength: entry.header.rawLength, storedLength: entry.header.storedLength, time: entry.header.time,
                    manifest: entry.header.isManifest))
            }
        }
        report.bytesCopied += copied
        let (lsn, remaining) = try core.withLock { core -> (UInt64?, UInt64) in
            guard core.isOpen else { throw Store.closedError }
            // Only collection moves or drops blobs, and collections do not overlap, so every copied
            // blob is still where it was read; the check keeps that an invariant rather than a hope.
            let moving = placements.filter { core.state.blobs[$0.digest]?.location.pack == pack }
            var lsn: UInt64?
            for start in stride(from: 0, to: moving.count, by: LocalEngine.movesPerRecord) {
                let batch = Array(moving[start ..< min(start + LocalEngine.movesPerRecord, moving.count)])
                lsn = try wal.append(.blobs(batch))
                core.state.apply(batch)
            }
            return (lsn, core.state.blobs.liveBytesByPack[pack] ?? 0)
        }
        // Rule 2: the moves (and, through the WAL's pack sync, the copies) are durable before the pack goes.
        if let lsn { try commits.flush(upTo: lsn, synchronously: true) }
        guard remaining == 0 else {
            // The walk stops at an entry header that does not parse, so blobs behind it were not copied.
            logger.error("pack holds live blobs its entries could not be walked to; pack not rewritten", metadata: [
                "path": "\(file.path)", "liveBytes": "\(remaining)",
            ])
            return nil
        }
        try packs.remove(pack)
        return copied
    }
}
