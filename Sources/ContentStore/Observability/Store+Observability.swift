import Foundation
import Logging

/// What the engine reports as it works: each helper here is the one call an engine path makes for
/// an event, so counting and logging stay out of the engine's logic. Messages name files, offsets,
/// digests and counts — never a record's value, blob bytes or a secret (a key appears only where a
/// damage report names the record it found damaged). Docs/operations.md lists every message.
extension Store {
    /// A `write` that committed: one commit, its duration (call to durable return), the gauges when due.
    func noteCommit(since started: ContinuousClock.Instant) {
        metrics.committed(since: started)
        refreshGaugesIfDue()
    }

    /// A `put` call that returned (a deduplicated one too): one put and its logical bytes.
    func notePut(bytes: UInt64) {
        metrics.put(bytes: bytes)
        refreshGaugesIfDue()
    }

    /// A finished collection: counted unless a dry run; the gauges set from the state after it.
    func noteCollection(_ report: GarbageCollectionReport) {
        metrics.collected(report)
        refreshGauges()
    }

    /// A finished verification: damage is logged at error, one line per problem (they name files,
    /// offsets and digests), a clean store at info.
    func noteVerification(_ report: VerificationReport) -> VerificationReport {
        if report.isClean {
            logger.info("verification found no damage", metadata: [
                "blobs": "\(report.blobsChecked)", "records": "\(report.recordsChecked)", "readData": "\(report.readData)",
            ])
        } else {
            logger.error("verification found damage", metadata: ["problems": "\(report.problems.count)", "path": "\(layout.root)"])
            for problem in report.problems {
                logger.error("damage", metadata: [
                    "kind": "\(problem.kind)", "path": "\(problem.path ?? "")", "offset": "\(problem.offset.map(String.init) ?? "")",
                    "digest": "\(problem.digest?.hex ?? "")", "problem": "\(problem.message)",
                ])
            }
        }
        return report
    }

    /// Runs a read of stored bytes; a `corrupted` error is logged (blob, file, offset) and rethrown.
    func logDamage<T>(to digest: Digest, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StoreError where error.code == .corrupted {
            logger.error("damaged blob", metadata: [
                "digest": "\(digest.hex)", "path": "\(error.path ?? "")", "offset": "\(error.offset.map(String.init) ?? "")",
                "error": "\(error.message)",
            ])
            throw error
        }
    }

    /// Runs a write or sync of the log; a failure is logged at error (the log then refuses further
    /// writes until the store is reopened) and rethrown.
    func logFailure<T>(_ message: Logger.Message, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            logger.error(message, metadata: ["path": "\(layout.wal)", "error": "\(error)"])
            throw error
        }
    }

    /// Sets the gauges from the state (the core lock briefly, no I/O).
    func refreshGauges() {
        guard let (blobCount, recordCount) = core.withLock({ core in
            core.isOpen ? (core.state.blobs.count, core.state.records.count) : nil
        }) else { return }
        metrics.record(blobCount: blobCount, recordCount: recordCount, storedBytes: packs.totalBytes)
    }

    /// ``refreshGauges()`` at most once per ``StoreMetrics/gaugeInterval``: after commits and puts.
    func refreshGaugesIfDue() {
        if metrics.gaugeRefreshIsDue() { refreshGauges() }
    }
}
