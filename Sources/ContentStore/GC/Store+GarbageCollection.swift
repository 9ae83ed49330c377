import Foundation

extension Store {
    /// Removes blobs that have been unreferenced for at least the grace period, then rewrites packs
    /// whose dead fraction passes the threshold and deletes packs with nothing live.
    ///
    /// Safe while other threads put, read and write: the decision to remove a blob is made under the
    /// lock that commits take, so a blob that is referenced or freshened by a put is never removed;
    /// blobs that a live ``Snapshot`` may still read are spared. The index change that drops or moves
    /// blobs is durable before any pack file is deleted. Work is proportional to the garbage: only
    /// unreferenced blobs and the packs being rewritten are visited.
    public func collectGarbage(_ options: GarbageCollectionOptions = .init()) throws -> GarbageCollectionReport {
        try checkOpen()
        let started = ContinuousClock.now
        var report = try maintenance.withLock { _ in
            var report = GarbageCollectionReport(dryRun: options.dryRun)
            let grace = options.gracePeriod ?? configuration.garbageGracePeriod
            guard grace >= .zero else { throw StoreError.invalidArgument("the grace period is negative") }
            let dropped = try dropExpiredBlobs(grace: grace, dryRun: options.dryRun, report: &report)
            try compactPacks(threshold: options.packRewriteThreshold ?? configuration.packRewriteThreshold,
                             pretendingDropped: options.dryRun ? dropped : [:], dryRun: options.dryRun, report: &report)
            return report
        }
        report.duration = ContinuousClock.now - started
        logger.info("garbage collected", metadata: [
            "blobs": "\(report.blobsRemoved)", "bytesFreed": "\(report.bytesFreed)",
            "packsRewritten": "\(report.packsRewritten)", "packsDeleted": "\(report.packsDeleted)",
            "dryRun": "\(report.dryRun)", "duration": "\(report.duration)",
        ])
        return report
    }

    /// Phase 1: chooses expired unreferenced blobs and, unless a dry run, drops them durably.
    private func dropExpiredBlobs(grace: Duration, dryRun: Bool, report: inout GarbageCollectionReport) throws -> [Digest: BlobEntry] {
        let now = Int64(nowSeconds)
        let graceSeconds = Int64(clamping: grace.components.seconds) + (grace.components.attoseconds > 0 ? 1 : 0)
        let (chosen, lsn) = try core.withLock { core -> ([Digest: BlobEntry], UInt64?) in
            guard core.isOpen else { throw Store.closedError }
            let horizon = published.withLock { published in
                [published.horizon, snapshots.oldest].compactMap { $0 }.min()
            }
            var chosen: [Digest: BlobEntry] = [:]
            for digest in core.state.blobs.unreferenced {
                guard let entry = core.state.blobs[digest] else { continue }
                let expired = now - Int64(entry.zeroSince) >= graceSeconds
                let unseen = horizon.map { entry.zeroSince < $0 } ?? true
                if expired && unseen { chosen[digest] = entry }
            }
            guard !dryRun, !chosen.isEmpty else { return (chosen, nil) }
            var lsn: UInt64 = 0
            let digests = Array(chosen.keys)
            for start in stride(from: 0, to: digests.count, by: 65536) {
                lsn = try wal.append(.drop(time: UInt32(clamping: now), digests: Array(digests[start ..< min(start + 65536, digests.count)])))
            }
            do {
                try core.state.drop(digests)
            } catch {
                throw StoreError(code: .corrupted, message: "collection could not drop blobs: \(error)")
            }
            return (chosen, lsn)
        }
        if let lsn { try wal.flush(upTo: lsn, synchronously: true) }
        report.blobsRemoved = chosen.count
        for entry in chosen.values {
            report.bytesFreed += entry.entryLength
            report.logicalBytesFreed += UInt64(entry.rawLength)
        }
        return chosen
    }

    /// Phase 2: deletes packs with nothing live and rewrites packs that are mostly dead.
    private func compactPacks(threshold: Double, pretendingDropped: [Digest: BlobEntry], dryRun: Bool, report: inout GarbageCollectionReport) throws {
        // Packs are chosen from the state in memory; what made them dead must be durable before any is
        // deleted (and a log that failed, holding changes that never reached the disk, stops here).
        if !dryRun { try wal.flush(upTo: wal.appendedLSN, synchronously: true) }
        let active = packs.activePackID
        var liveBytes = core.withLock { $0.state.blobs.liveBytesByPack }
        for entry in pretendingDropped.values {
            liveBytes[entry.location.pack, default: 0] -= entry.entryLength
        }
        for pack in packs.packIDs where pack != active {
            guard let size = packs.size(of: pack) else { continue }
            let live = liveBytes[pack] ?? 0
            let dead = size - min(size, live + UInt64(PackFormat.headerSize))
            if live == 0 {
                report.packsDeleted += 1
                report.bytesReclaimed += size
                if !dryRun { try packs.remove(pack) }
            } else if Double(dead) >= threshold * Double(size) {
                report.packsRewritten += 1
                report.packsDeleted += 1
                report.bytesCopied += live
                report.bytesReclaimed += size - live
                if !dryRun { try rewrite(pack) }
            }
        }
        if !dryRun && report.packsDeleted > 0 { try fileSystem.synchronizeDirectory(layout.packs) }
    }

    /// Copies a pack's live entries to the active pack, makes the move durable, deletes the pack.
    private func rewrite(_ pack: UInt32) throws {
        guard let file = packs.file(pack) else { return }
        var placements: [LogRecord.BlobPlacement] = []
        for (offset, header) in try PackReader.entries(of: file) {
            let isLive = core.withLock { $0.state.blobs[header.digest]?.location == BlobLocation(pack: pack, offset: offset) }
            guard isLive else { continue }
            let bytes = try file.readExactly(Int(header.totalLength), at: offset)
            let (headerBytes, payload) = (Array(bytes[..<PackFormat.entryHeaderSize]), Array(bytes[PackFormat.entryHeaderSize...]))
            let intact = headerBytes.withUnsafeBytes { h in payload.withUnsafeBytes { PackFormat.checksumMatches(header: h, payload: $0) } }
            guard intact else {
                throw StoreError.corrupted("pack entry for blob \(header.digest) fails its checksum; not rewriting the pack", path: file.path, offset: offset)
            }
            let location = try payload.withUnsafeBytes {
                try packs.append(header: headerBytes, payload: $0, indexEntry: PackFormat.IndexEntry(
                    digest: header.digest, offset: 0, rawLength: header.rawLength, storedLength: header.storedLength))
            }
            placements.append(LogRecord.BlobPlacement(
                digest: header.digest, location: location, compressed: header.isCompressed,
                rawLength: header.rawLength, storedLength: header.storedLength, time: header.time))
        }
        let lsn = try core.withLock { core -> UInt64? in
            guard core.isOpen else { throw Store.closedError }
            // Only blobs still held where they were read from move; others were dropped meanwhile.
            let moving = placements.filter { placement in
                guard let entry = core.state.blobs[placement.digest] else { return false }
                return entry.location.pack == pack
            }
            guard !moving.isEmpty else { return nil }
            var lsn: UInt64 = 0
            for start in stride(from: 0, to: moving.count, by: 65536) {
                let batch = Array(moving[start ..< min(start + 65536, moving.count)])
                lsn = try wal.append(.blobs(batch))
                core.state.apply(batch)
            }
            return lsn
        }
        if let lsn { try wal.flush(upTo: lsn, synchronously: true) }
        try packs.remove(pack)
    }
}
