import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// Power cuts while recovery itself runs.
    ///
    /// Opening a store after a crash writes: it truncates a torn WAL tail, writes back the pack
    /// bytes the log carried, syncs directories an earlier open may not have, and closing trims
    /// the segment it extended. Each of those is a moment a second power cut can land. For each
    /// sync point of a core workload the test takes one crash image (a seeded random mix, as in
    /// ``PowerLossTests``), opens it on a ``PowerCutFileIO`` and, before every sync of that open
    /// and of the close after it, takes two images of the second cut (everything unsynced lost; a
    /// seeded mix). Each must reopen to a state that holds every commit acknowledged before the
    /// first cut, verify clean, and take a new commit. And once recovery has opened the store and
    /// closed it, what it exposed must be durable: the durable-only image after the close opens
    /// to exactly the records recovery showed.
    ///
    /// `RELIABILITY_RECOVERY_STRIDE=n` sweeps recovery from every n-th workload sync point only.
    @Suite("Reliability: power cut during recovery", .blocking)
    struct PowerCutDuringRecoveryTests {
        @Test(arguments: CoreWorkload.allCases)
        func everySyncOfRecoverySurvivesASecondPowerCut(_ workload: CoreWorkload) async throws {
            let dir = ScratchDirectory()
            let stride = environmentInteger("RELIABILITY_RECOVERY_STRIDE", default: 1)
            let crashes = dir.url.appendingPathComponent("crashes")

            let crashImages = Mutex<[(url: URL, candidates: Set<Journal.State>, index: Int)]>([])
            let failures = Mutex<[String]>([])
            let (_, io) = try runOnPowerCutDisk(workload, disk: dir.url.appendingPathComponent("disk")) { disk, index, journal in
                guard index % stride == 0 else { return }
                var random = SeededRandom(seed: 0xC0FFEE ^ UInt64(index))
                let url = crashes.appendingPathComponent("\(index)")
                do {
                    try disk.writeImage(to: url, mode: .random, random: &random)
                    crashImages.withLock { $0.append((url, journal.candidates, index)) }
                } catch {
                    failures.withLock { $0.append("crash image at sync #\(index): \(error)") }
                }
            }
            #expect(failures.withLock { $0 } == [])

            var recoverySyncs = 0, secondCuts = 0
            let images = crashImages.withLock { $0 }
            #expect(images.count >= io.syncCount / stride, "every sync point should have given a crash image")
            for image in images {
                let label = "\(workload) crash at sync #\(image.index)"
                let swept = try sweepRecovery(of: image.url, candidates: image.candidates, scratch: dir.url.appendingPathComponent("cuts"), label)
                recoverySyncs += swept.syncs
                secondCuts += swept.images
                try? FileManager.default.removeItem(at: image.url)
                await Task.yield()  // a long sweep must not hold a thread async tests need
            }
            // Recovery that never syncs would make the sweep vacuous: the workloads leave work for it.
            #expect(recoverySyncs > images.count, "recovery synced \(recoverySyncs) times over \(images.count) crash images")
            ReliabilityReport.record("power-loss-recovery-\(workload)", [
                "crashImages": images.count, "recoverySyncPoints": recoverySyncs, "images": secondCuts,
            ], summary: "power loss during recovery: \(workload): \(images.count) crash images, \(recoverySyncs) sync points of recovery swept, "
                + "\(secondCuts) images of a second cut checked")
        }

        /// Opens the crash image at `image` (its store in `store/`) on a power-cut disk, closes it,
        /// and checks an image of a second cut before every sync that did.
        private func sweepRecovery(of image: URL, candidates: Set<Journal.State>, scratch: URL,
                                   _ label: String) throws -> (syncs: Int, images: Int) {
            let cuts = Mutex<[(url: URL, label: String)]>([])
            let failures = Mutex<[String]>([])
            let io = PowerCutFileIO(root: image) { disk, index in
                for (variant, mode) in [PowerCutFileIO.ImageMode.durableOnly, .random].enumerated() {
                    var random = SeededRandom(seed: UInt64(index) << 8 | UInt64(variant) | 0x5000)
                    let url = scratch.appendingPathComponent("\(index)-\(variant)")
                    do {
                        let decisions = try disk.writeImage(to: url, mode: mode, random: &random)
                        if decisions == 0 && variant > 0 {
                            try? FileManager.default.removeItem(at: url)
                            continue
                        }
                        cuts.withLock { $0.append((url, "\(label), second cut at recovery sync #\(index), \(mode) image")) }
                    } catch {
                        failures.withLock { $0.append("\(label): image at recovery sync #\(index): \(error)") }
                    }
                }
            }
            var seams = Store.Seams()
            seams.fileIO = io
            let store = try Store(at: image.appendingPathComponent("store"), configuration: Store.Configuration(), seams: seams)
            let recovered = try allRecords(store)
            try store.close()
            #expect(candidates.contains(recovered), "\(label): recovery opened \(recovered.count) records, not a committed prefix")
            #expect(failures.withLock { $0 } == [])

            var random = SeededRandom(seed: 1)
            let after = scratch.appendingPathComponent("after-close")
            try io.writeImage(to: after, mode: .durableOnly, random: &random)
            checkRecoveredStore(at: after.appendingPathComponent("store"), candidates: [recovered], "\(label), cut after recovery closed")
            try? FileManager.default.removeItem(at: after)

            let all = cuts.withLock { $0 }
            for cut in all {
                checkRecoveredStore(at: cut.url.appendingPathComponent("store"), candidates: candidates, cut.label)
                try? FileManager.default.removeItem(at: cut.url)
            }
            return (io.syncCount, all.count)
        }
    }
}
