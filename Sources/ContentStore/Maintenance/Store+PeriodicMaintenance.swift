extension Store {
    /// Starts ``Configuration/maintenanceInterval``'s timer.
    ///
    /// The timer holds the store weakly: a store its owner released is closed by `deinit` as usual,
    /// which cancels the timer. Each run holds the store strongly only while it works.
    func startPeriodicMaintenance(every interval: Duration) {
        background.repeatEvery(interval) { [weak self] in
            // Nil while the store is being deinitialized; its close() cancels this timer.
            guard let self else { return }
            // Named, so a run still going when the timer fires again is not doubled.
            background.run("periodic maintenance") { [self] in runPeriodicMaintenance() }
        }
    }

    /// One periodic run: collect garbage with the configured grace period, then write a checkpoint
    /// if anything was logged since the last one. Failures are logged; the next run tries again.
    func runPeriodicMaintenance() {
        do {
            _ = try collectGarbage()
            try maintenance.withLock { _ in
                try checkOpen()
                // A fresh segment holds only its header: nothing to fold into a checkpoint.
                guard wal.totalBytes > UInt64(WALFormat.headerSize) else { return }
                try writeCheckpoint()
            }
        } catch let error as StoreError where error.code == .closed {
            return
        } catch {
            logger.error("periodic maintenance failed", metadata: ["error": "\(error)"])
        }
    }
}
