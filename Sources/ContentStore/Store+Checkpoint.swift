import Foundation

extension Store {
    /// Writes a checkpoint of the current state and deletes the WAL segments and checkpoints it
    /// makes unnecessary, so the next open replays less. Runs automatically in the background once
    /// the WAL passes ``Configuration/checkpointThreshold``. Writers are paused only while the WAL
    /// is cut to a new segment, not while the checkpoint is written.
    public func checkpoint() throws {
        try checkOpen()
        try maintenance.withLock { _ in try writeCheckpoint() }
        refreshGauges()
    }

    func writeCheckpoint() throws {
        let started = ContinuousClock.now
        // The lead first: a leader may be waiting for the core lock to take its batch.
        let contents = try wal.whileLeading {
            try core.withLock { core -> Checkpoint.Contents in
                guard core.isOpen else { throw Store.closedError }
                let firstSegment = try wal.rotate { take in try takeBatch(take, core: &core) }
                return Checkpoint.Contents(firstSegment: firstSegment, state: core.state)
            }
        }
        try Checkpoint.write(contents, directory: layout.checkpoints, fileSystem: fileSystem)
        // Only now that the checkpoint is durable may what it replaces go.
        for name in try fileSystem.contents(of: layout.checkpoints) {
            if let number = Checkpoint.firstSegment(fromFileName: name), number < contents.firstSegment {
                try fileSystem.remove(layout.checkpoints + "/" + name)
            }
        }
        for name in try fileSystem.contents(of: layout.wal) {
            if let number = WALFormat.number(fromFileName: name), number < contents.firstSegment {
                try fileSystem.remove(layout.wal + "/" + name)
            }
        }
        try fileSystem.synchronizeDirectory(layout.wal)
        wal.segmentsRemoved(before: contents.firstSegment)
        logger.info("checkpoint written", metadata: [
            "segment": "\(contents.firstSegment)", "blobs": "\(contents.state.blobs.count)",
            "records": "\(contents.state.records.count)", "duration": "\(ContinuousClock.now - started)",
        ])
    }

    func scheduleCheckpointIfNeeded() {
        guard wal.bytesSinceCheckpoint.load(ordering: .relaxed) >= configuration.checkpointThreshold else { return }
        background.run("checkpoint") { [self] in
            do {
                try maintenance.withLock { _ in
                    // Another checkpoint may have run while this one waited.
                    guard wal.totalBytes >= configuration.checkpointThreshold else { return }
                    try writeCheckpoint()
                }
            } catch {
                logger.error("background checkpoint failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
