#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ContentStore
import Foundation
import Testing
@testable import Persist

/// A process killed with SIGKILL in the middle of writes, undos and redos reopens to the state of
/// its last acknowledged step (or of the step in flight, had it committed), with the whole history
/// intact: every step still undoes and redoes to the state it should.
///
/// The child is a Swift Testing exit test (the test binary run again as a real process): it runs
/// ``RandomWork`` from a seed, appends one byte to a side file after each acknowledged step, and
/// is killed by a thread of its own a while after its first step. The parent replays the same seed on a scratch
/// store to know every state the history must hold.
@Suite struct CrashTests {
    @Test(arguments: [(50, 11), (300, 12), (900, 13)] as [(Int, UInt64)])
    func aKilledWriterReopensToItsLastAcknowledgedStepWithItsHistory(delayMilliseconds: Int, seed: UInt64) async throws {
        let directory = TemporaryDirectory()
        let storePath = directory.store.path
        let progressPath = directory.url.appendingPathComponent("acknowledged").path
        _ = FileManager.default.createFile(atPath: progressPath, contents: nil)

        await #expect(processExitsWith: .signal(SIGKILL)) { [storePath = storePath as String, progressPath = progressPath as String,
                                                            delayMilliseconds = delayMilliseconds as Int, seed = seed as UInt64] in
            let store = try Store(at: URL(fileURLWithPath: storePath))
            let persister = try Persister(store: store)
            let progress = try #require(FileHandle(forWritingAtPath: progressPath))
            var model = Model()
            var work = RandomWork(seed: seed)
            for index in 0... {
                _ = try work.step(persister, &model)
                try progress.write(contentsOf: [1])
                // Counted from the first acknowledged step, so that a slow start still leaves one.
                guard index == 0 else { continue }
                Thread.detachNewThread {
                    usleep(useconds_t(delayMilliseconds * 1000))
                    kill(getpid(), SIGKILL)
                }
            }
        }

        let acknowledged = try Data(contentsOf: URL(fileURLWithPath: progressPath)).count
        try #require(acknowledged > 0, "the child was killed before its first step")
        try await onOwnThread { try Self.checkRecovered(directory, seed: seed, acknowledged: acknowledged) }
    }

    static func checkRecovered(_ directory: TemporaryDirectory, seed: UInt64, acknowledged: Int) throws {
        // The models after the acknowledged steps and after the one in flight.
        let scratch = try Fixture(name: "replay")
        var model = Model()
        var work = RandomWork(seed: seed)
        for _ in 0 ..< acknowledged { _ = try work.step(scratch.persister, &model) }
        let acknowledgedModel = model
        _ = try work.step(scratch.persister, &model)
        let inFlightModel = model

        let store = try Store(at: directory.store)
        defer { try? store.close() }
        let persister = try Persister(store: store)
        let history = try persister.history()
        let recovered = try persister.read { try ($0.fetchAll(Item.self), $0.fetchAll(Tag.self)) }
        func matches(_ model: Model) -> Bool {
            recovered.0 == model.current.items.values.sorted { $0.id.uuidString < $1.id.uuidString }
                && recovered.1 == model.current.tags.values.sorted { $0.id.uuidString < $1.id.uuidString }
                && history.steps.map(\.actionName) == model.names && history.cursor == model.cursor
        }
        var expected = acknowledgedModel
        if !matches(acknowledgedModel) {
            #expect(matches(inFlightModel), "after \(acknowledged) acknowledged steps the store holds neither their state nor the next one's")
            expected = inFlightModel
        }
        try expectState(persister, expected.current, history: expected, "reopened after the kill")
        while expected.undo() {
            #expect(try persister.undo() != nil)
            try expectState(persister, expected.current, history: expected, "undo to \(expected.cursor) after the kill")
        }
        while expected.redo() {
            #expect(try persister.redo() != nil)
            try expectState(persister, expected.current, history: expected, "redo to \(expected.cursor) after the kill")
        }
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
    }
}
