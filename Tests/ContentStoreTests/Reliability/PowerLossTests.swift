import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// Power cuts at every sync point of the core workloads.
    ///
    /// The workload runs on ``PowerCutFileIO``. Before each sync (and once more at the end) the test
    /// takes images of the disk as a power cut at that moment could leave it: everything unsynced
    /// lost; everything unsynced kept (what a process crash leaves); and seeded mixes of dropped,
    /// kept, torn and zero-filled writes with each directory's unsynced changes lost or kept. A cut
    /// between two syncs is one of these mixes (the writes after the cut dropped), so taking images at
    /// the syncs covers every moment. Each image must open to a committed prefix that holds every
    /// commit acknowledged before the cut, verify clean with every blob re-hashed, and take new commits.
    ///
    /// `RELIABILITY_POWER_MIXES` sets the number of random mixes per sync point (default 2).
    @Suite("Reliability: power loss", .blocking)
    struct PowerLossTests {
        struct Image {
            var url: URL
            var candidates: Set<Journal.State>
            var label: String
        }

        @Test(arguments: CoreWorkload.allCases)
        func everySyncPointSurvivesAPowerCut(_ workload: CoreWorkload) async throws {
            let dir = ScratchDirectory()
            let imagesURL = dir.url.appendingPathComponent("images")
            let mixes = environmentInteger("RELIABILITY_POWER_MIXES", default: 2)
            let modes: [PowerCutFileIO.ImageMode] = [.durableOnly, .everything] + Array(repeating: .random, count: mixes)

            let images = Mutex<[Image]>([])
            let failures = Mutex<[String]>([])
            let (runner, io) = try runOnPowerCutDisk(workload, disk: dir.url.appendingPathComponent("disk")) { disk, index, journal in
                let candidates = journal.candidates
                for (variant, mode) in modes.enumerated() {
                    var random = SeededRandom(seed: UInt64(index) << 8 | UInt64(variant))
                    let url = imagesURL.appendingPathComponent("\(index)-\(variant)")
                    do {
                        let decisions = try disk.writeImage(to: url, mode: mode, random: &random)
                        // Mixes of an image with nothing unsynced repeat the durable-only one.
                        if decisions == 0 && variant > 0 {
                            try? FileManager.default.removeItem(at: url)
                            continue
                        }
                        images.withLock {
                            $0.append(Image(url: url, candidates: candidates, label: "\(workload) cut at sync #\(index), \(mode) image (variant \(variant))"))
                        }
                    } catch {
                        failures.withLock { $0.append("image at sync #\(index): \(error)") }
                    }
                }
            }
            #expect(failures.withLock { $0 } == [])

            // After the workload: everything acknowledged is durable even with nothing else kept.
            var random = SeededRandom(seed: 1)
            let finalImage = imagesURL.appendingPathComponent("final")
            try io.writeImage(to: finalImage, mode: .durableOnly, random: &random)
            let final = checkRecoveredStore(at: finalImage.appendingPathComponent("store"), candidates: runner.journal.candidates, "\(workload) after close")
            #expect(final != nil)

            let all = images.withLock { $0 }
            #expect(io.syncCount > 10, "the workload should sync often")
            #expect(all.count >= io.syncCount * 2)
            for image in all {
                checkRecoveredStore(at: image.url.appendingPathComponent("store"), candidates: image.candidates, image.label)
                try? FileManager.default.removeItem(at: image.url)
                await Task.yield()  // a long sweep must not hold a thread async tests need
            }
            ReliabilityReport.record("power-loss-\(workload)", [
                "syncPoints": io.syncCount, "images": all.count + 1, "acknowledgedCommits": runner.journal.acknowledged, "mixesPerSyncPoint": mixes,
            ], summary: "power loss: \(workload): \(io.syncCount) sync points swept, \(all.count + 1) images checked (\(mixes) random mixes per sync point), "
                + "\(runner.journal.acknowledged) commits acknowledged")
        }
    }
}
