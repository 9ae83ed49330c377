import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Warehouse
import TestThreads

/// Many threads at once.
@Suite(.blocking) struct ConcurrencyTests {
    @Test func eightThreadsUpdateDifferentProjects() throws {
        let fixture = try Fixture()
        let storage = fixture.storage
        let ids = try (0 ..< 8).map { _ in try storage.createProject() }
        let observer = RecordingObserver()
        storage.addObserver(observer)
        let failures = Mutex<[String]>([])
        let rounds = 20

        DispatchQueue.concurrentPerform(iterations: ids.count) { thread in
            let id = ids[thread]
            do {
                for round in 0 ..< rounds {
                    let snapshot = try storage.fetchSnapshot(ofProject: id, options: .all)
                    let content = StepContent(userData: Data("\(thread)/\(round)".utf8),
                                              assets: ["a": bytes(8192, seed: UInt64(thread * 1000 + round))])
                    var request = try #require(ProjectUpdateRequest.addStep(snapshot, content: content))
                    request.userData = Data("thread \(thread) round \(round)".utf8)
                    try storage.update(request)
                    if round % 5 == 4 {
                        try storage.update(#require(ProjectUpdateRequest.undo(try storage.fetchSnapshot(ofProject: id, options: .all))))
                        try storage.update(#require(ProjectUpdateRequest.redo(try storage.fetchSnapshot(ofProject: id, options: .all))))
                    }
                    try storage.setAsset(Data("\(round)".utf8), named: "latest", inProject: id)
                }
            } catch {
                failures.withLock { $0.append("thread \(thread): \(error)") }
            }
        }

        #expect(failures.withLock { $0 } == [])
        for (thread, id) in ids.enumerated() {
            let snapshot = try storage.fetchSnapshot(ofProject: id, options: .all)
            let steps = try #require(snapshot.stepIDs)
            #expect(steps.count == rounds)
            #expect(snapshot.stepCursor == rounds)
            #expect(snapshot.userData == Data("thread \(thread) round \(rounds - 1)".utf8))
            for (round, step) in steps.enumerated() {
                #expect(try storage.fetchStep(step, fromProject: id).userData == Data("\(thread)/\(round)".utf8))
                #expect(try storage.asset(named: "a", inStep: step, ofProject: id) == bytes(8192, seed: UInt64(thread * 1000 + round)))
            }
            #expect(try storage.asset(named: "latest", inProject: id) == Data("\(rounds - 1)".utf8))
        }
        // 20 add-steps + 4 undos + 4 redos per project.
        #expect(observer.events.count == 8 * (rounds + 8))
        #expect(try fixture.store.verify(VerificationOptions(readData: true)).isClean)
    }

    @Test func concurrentUpdatesOfOneProjectAreSerialized() throws {
        let fixture = try Fixture()
        let storage = fixture.storage
        let id = try storage.createProject()
        let perThread = 10
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0 ..< perThread {
                var request = ProjectUpdateRequest(projectID: id)
                request.stepsContentToAdd = [StepContent(userData: Data("\(thread)-\(index)".utf8))]
                try? storage.update(request)
            }
        }
        let snapshot = try storage.fetchSnapshot(ofProject: id, options: .all)
        // No update was lost: every one inserted its step at the cursor (0), in one commit each.
        #expect(snapshot.stepIDs?.count == 4 * perThread)
        #expect(Set(snapshot.stepIDs ?? []).count == 4 * perThread)
    }

    @Test func readersDuringWritesSeeWholeStates() throws {
        let fixture = try Fixture()
        let storage = fixture.storage
        let id = try storage.createProject()
        let done = Atomic<Bool>(false)
        let torn = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                for round in 1 ... 30 {
                    var request = try! #require(ProjectUpdateRequest.addStep(
                        try! storage.fetchSnapshot(ofProject: id, options: .all), content: StepContent(userData: Data())))
                    request.userData = Data("\(round)".utf8)
                    try! storage.update(request)
                }
                done.store(true, ordering: .releasing)
            } else {
                while !done.load(ordering: .acquiring) {
                    guard let snapshot = try? storage.fetchSnapshot(ofProject: id, options: .all) else { continue }
                    let count = snapshot.stepIDs?.count ?? -1
                    let userData = snapshot.userData.flatMap { String(data: $0, encoding: .utf8) }.flatMap(Int.init) ?? 0
                    if count != userData || snapshot.stepCursor != count { torn.add(1, ordering: .relaxed) }
                }
            }
        }
        #expect(torn.load(ordering: .relaxed) == 0)
    }
}
