import ContentStore
import Foundation
import Testing
@testable import Persist

/// Random writes, undos, redos and prunes, checked against ``Model`` after every step, then after
/// close and reopen, where the whole history must still undo and redo to the model's states.
@Suite struct ModelTests {
    @Test(arguments: [1, 2] as [UInt64])
    func randomWorkMatchesTheModelThroughReopen(seed: UInt64) async throws {
        try await onOwnThread { try Self.run(seed: seed) }
    }

    static func run(seed: UInt64) throws {
        let fixture = try Fixture()
        var model = Model()
        var work = RandomWork(seed: seed)
        for index in 0 ..< 1000 {
            let did = try work.step(fixture.persister, &model, clock: fixture.clock)
            try expectState(fixture.persister, model.current, history: model, "step \(index) (\(did), seed \(seed))")
        }
        try fixture.reopen()
        try expectState(fixture.persister, model.current, history: model, "after reopen")

        // The whole history, down and up again.
        while model.undo() {
            #expect(try fixture.persister.undo() != nil)
            try expectState(fixture.persister, model.current, history: model, "undo to \(model.cursor) after reopen")
        }
        #expect(try fixture.persister.undo() == nil)
        while model.redo() {
            #expect(try fixture.persister.redo() != nil)
            try expectState(fixture.persister, model.current, history: model, "redo to \(model.cursor) after reopen")
        }
        #expect(try fixture.persister.redo() == nil)
        #expect(try fixture.store.verify(VerificationOptions(readData: true)).isClean)
    }
}
