import ContentStore
import Foundation
import Testing
@testable import Persist

/// Pruning the history, then collecting garbage, removes exactly the blobs that only the pruned
/// steps referenced: old bodies and the pruned steps' diffs; everything the graph and the kept
/// steps reference stays readable.
@Suite struct PruneTests {
    @Test func pruneThenCollectReclaimsExactlyWhatOnlyPrunedStepsReferenced() async throws {
        try await onOwnThread(Self.run)
    }

    static func run() throws {
        let fixture = try Fixture()
        var model = Model()
        var work = RandomWork(seed: 7)
        for _ in 0 ..< 200 { _ = try work.step(fixture.persister, &model) }
        for _ in 0 ..< 3 {
            _ = try fixture.persister.undo()
            _ = model.undo()
        }

        let layout = fixture.persister.layout
        /// The blobs the persister's records reference.
        func referenced() throws -> Set<Digest> {
            try fixture.store.read { snapshot in
                var digests = Set<Digest>()
                for key in try snapshot.keys(withPrefix: layout.prefix) {
                    digests.formUnion(try #require(try snapshot.record(forKey: key)).references)
                }
                return digests
            }
        }
        // What is garbage already (bodies and diffs of redo steps a write dropped) goes first.
        let options = GarbageCollectionOptions(gracePeriod: .zero)
        _ = try fixture.store.collectGarbage(options)
        let before = try referenced()
        for digest in before { #expect(fixture.store.contains(digest)) }
        try fixture.persister.pruneHistory(keepingLast: 5)
        let after = try referenced()
        let onlyPruned = before.subtracting(after)
        #expect(!onlyPruned.isEmpty)
        #expect(after.isSubset(of: before))

        let report = try fixture.store.collectGarbage(options)
        #expect(report.blobsRemoved == onlyPruned.count)
        for digest in onlyPruned { #expect(!fixture.store.contains(digest)) }
        for digest in after { #expect(fixture.store.contains(digest)) }

        // The graph and the five kept steps still work.
        try expectState(fixture.persister, model.current, "after prune and gc")
        #expect(try fixture.persister.history().steps.count == 5)
        while try fixture.persister.undo() != nil {}
        while try fixture.persister.redo() != nil {}
        #expect(try fixture.store.verify(VerificationOptions(readData: true)).isClean)
    }
}
