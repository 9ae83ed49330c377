import Foundation
import Testing
@testable import ContentStore
import TestThreads
#if canImport(Glibc)
import Glibc
#endif

/// A process killed with SIGKILL at random moments while it collects garbage: the store opens,
/// nothing referenced is lost, and the next collection finishes the job.
@Suite(.blocking) struct GarbageCollectionCrashTests {
    /// Seconds to keep killing; `CONTENTSTORE_CRASH_SECONDS` raises it for longer runs.
    static let budget = Double(ProcessInfo.processInfo.environment["CONTENTSTORE_CRASH_SECONDS"] ?? "") ?? 8

    static func configuration() -> Store.Configuration {
        var configuration = Store.Configuration()
        configuration.packSizeTarget = 1 << 16
        return configuration
    }

    @Test func killedWhileCollectingLosesNothingReferenced() throws {
        let dir = ScratchDirectory()
        // Referenced blobs interleaved with garbage in small packs, so the first collections move
        // referenced blobs while rewriting packs.
        var expected: [String: Data] = [:]
        do {
            let store = try Store(at: dir.store, configuration: Self.configuration())
            var random = TestRandom(seed: 77)
            for index in 0 ..< 160 {
                let data = random.bytes(2000 + Int(random.next() % 3000))
                let digest = try store.put(data)
                if index % 3 == 0 {
                    try store.write { try $0.setRecord(Record(references: [digest]), forKey: "base/\(index)") }
                    expected["base/\(index)"] = data
                }
            }
            try store.close()
        }

        var random = TestRandom(seed: 78)
        let deadline = Date().addingTimeInterval(Self.budget)
        var kills = 0, roundsCompleted = 0, seed: UInt64 = 0
        while Date() < deadline || kills < 3 {
            seed += 1
            let workload = try #require(CommandLineTool.collectionWorkload, "CollectionWorkload was not found beside the tests; build it (swift build)")
            let child = try CommandLineTool.start([dir.store.path, "\(seed)"], program: workload)
            // From early in the open to several rounds in. Until a round has completed, the window
            // doubles with each kill (up to 16 times): a slow build (a sanitizer, a loaded machine)
            // must still get collections to finish between kills.
            let window = UInt64(400_000) << min(roundsCompleted == 0 ? kills : 0, 4)
            usleep(useconds_t(20_000 + random.next() % window))
            kill(child.pid, SIGKILL)
            let outcome = child.wait()
            if child.wasKilled {
                kills += 1
            } else {
                Issue.record("the workload exited by itself (status \(outcome.status)): \(outcome.stderr)")
                break
            }
            roundsCompleted += outcome.output.split(separator: "\n").count

            let store = try Store(at: dir.store, configuration: Self.configuration())
            for (key, data) in expected {
                let digest = try #require(try store.record(forKey: key)?.references.first, "\(key) after kill \(kills)")
                #expect(try store.get(digest) == data, "\(key) after kill \(kills)")
            }
            for key in try store.keys(withPrefix: "torture/") {
                for digest in try store.record(forKey: key)?.references ?? [] {
                    #expect(throws: Never.self, "\(key) after kill \(kills)") { _ = try store.get(digest) }
                }
            }
            let problems = try store.verify(VerificationOptions(readData: true)).problems
            #expect(problems.isEmpty, "after kill \(kills): \(problems)")
            try store.close()
            if !problems.isEmpty { break }
        }
        #expect(roundsCompleted > 0, "some collections ran to completion between the kills")
        print("crash test: \(kills) kills with SIGKILL, \(roundsCompleted) rounds (put, commit, collect) completed between them")

        // The next collection finishes what the killed ones started.
        let store = try Store(at: dir.store, configuration: Self.configuration())
        defer { try? store.close() }
        _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
        #expect(try store.statistics().unreferencedBlobCount == 0, "no expired garbage left")
        let active = store.packs.activePackID
        for pack in store.packs.packIDs where pack != active {
            let live = store.core.withLock { $0.state.blobs.liveBytesByPack[pack] ?? 0 }
            #expect(live > 0, "dead pack \(pack) deleted")
        }
        for (key, data) in expected {
            let digest = try #require(try store.record(forKey: key)?.references.first)
            #expect(try store.get(digest) == data)
        }
        #expect(try store.verify(VerificationOptions(readData: true)).problems == [])
    }
}
