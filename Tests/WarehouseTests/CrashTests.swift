#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing
@testable import Warehouse

/// A writer killed (SIGKILL) in the middle of updates leaves every project at the state of its
/// last acknowledged update or the one after it, never between.
///
/// The child is a Swift Testing exit test: the test binary re-runs itself, does add-step updates
/// in a loop (each also sets the project's user data to the step count, and writes the number of
/// acknowledged updates to a side file), and kills itself at a random moment.
@Suite struct CrashTests {
    @Test(arguments: [30, 80, 200])
    func killedWriterLeavesOldOrNewState(delayMilliseconds: Int) async throws {
        let directory = TemporaryDirectory()
        let storePath = directory.store.path
        let progressPath = directory.url.appendingPathComponent("acknowledged").path
        let projectID: UUID
        do {
            let store = try Store(at: directory.store)
            projectID = try ProjectStorage(store: store, bundleID: "crash").createProject()
            try await store.close()
        }
        let projectString = projectID.uuidString

        await #expect(processExitsWith: .signal(SIGKILL)) { [storePath = storePath as String, progressPath = progressPath as String, projectString = projectString as String, delayMilliseconds = delayMilliseconds as Int] in
            let store = try Store(at: URL(fileURLWithPath: storePath))
            let storage = ProjectStorage(store: store, bundleID: "crash")
            let id = UUID(uuidString: projectString)!
            Thread.detachNewThread {
                usleep(useconds_t(delayMilliseconds * 1000))
                kill(getpid(), SIGKILL)
            }
            for round in 0 ..< 100_000 {
                let snapshot = try storage.fetchSnapshot(ofProject: id, options: .all)
                var request = ProjectUpdateRequest.addStep(
                    snapshot, content: StepContent(userData: Data("\(round)".utf8), assets: ["a": bytes(64 * 1024, seed: UInt64(round))]))!
                request.userData = Data("\(round + 1)".utf8)
                try storage.update(request)
                try Data("\(round + 1)".utf8).write(to: URL(fileURLWithPath: progressPath), options: .atomic)
            }
        }

        let acknowledged = (try? String(contentsOfFile: progressPath, encoding: .utf8)).flatMap { Int($0) } ?? 0
        let store = try Store(at: directory.store)
        let storage = ProjectStorage(store: store, bundleID: "check")
        let snapshot = try storage.fetchSnapshot(ofProject: projectID, options: .all)
        let steps = try #require(snapshot.stepIDs)
        // Old or new: the last acknowledged update is there, at most one more. (The side file is
        // written after `update` returns, so it may lag one behind what was acknowledged.)
        #expect(steps.count == acknowledged || steps.count == acknowledged + 1, "\(steps.count) steps, \(acknowledged) acknowledged")
        // Never between: user data, cursor and every step agree.
        #expect(snapshot.userData == (steps.isEmpty ? Data() : Data("\(steps.count)".utf8)))
        #expect(snapshot.stepCursor == steps.count)
        for (round, step) in steps.enumerated() {
            #expect(try storage.fetchStep(step, fromProject: projectID).userData == Data("\(round)".utf8))
            #expect(try storage.asset(named: "a", inStep: step, ofProject: projectID) == bytes(64 * 1024, seed: UInt64(round)))
        }
        #expect(try await store.keys(withPrefix: "warehouse/step/").count == steps.count)
        #expect(try await store.verify(VerificationOptions(readData: true)).isClean)
        // And the store takes updates again.
        try storage.update(#require(ProjectUpdateRequest.addStep(snapshot, content: StepContent(userData: Data("after".utf8)))))
        try await store.close()
    }
}
