import Foundation
import StateLens
import Testing
import TestThreads

/// A state with a large text: its versions are blobs of their own.
struct Document: Codable, Sendable, Equatable {
    var title = ""
    var body = ""
}

@Suite(.blocking) struct VersionTests {
    static func configuration(kept: Int) -> LensStore<Document>.Configuration {
        var configuration = LensStore<Document>.Configuration()
        configuration.keptVersions = kept
        return configuration
    }

    static func body(_ round: Int) -> String {
        String(repeating: "version \(round) of the body. ", count: 2000)
    }

    @Test func keptVersionsAreListedNewestFirstAndRestorable() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "doc", default: Document(), configuration: Self.configuration(kept: 2))
        for round in 1 ... 5 { try state.root.title.set("title \(round)") }
        let versions = try state.versions()
        #expect(versions.map(\.sequence) == [5, 4, 3])
        #expect(versions[0].date >= versions[2].date)
        try state.restore(versions[2])
        #expect(state.value.title == "title 3")
        #expect(try state.versions().map(\.sequence) == [6, 5, 4], "a restore is an ordinary update")
        #expect {
            try state.restore(LensVersion(sequence: 1, date: Date()))
        } throws: { error in
            (error as? StoreError)?.code == .notFound
        }
    }

    @Test func droppedVersionsAreCollectedAndKeptOnesAreNot() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "doc", default: Document(), configuration: Self.configuration(kept: 2))
        var parts: [[Digest]] = []
        for round in 1 ... 5 {
            try state.root.body.set(Self.body(round))
            let head = try #require(try fixture.store.record(forKey: "statelens/h/doc"))
            #expect(!head.references.isEmpty, "a large body is stored as a blob of its own")
            parts.append(head.references)
        }
        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        _ = try fixture.store.collectGarbage(options)
        for (index, digests) in parts.enumerated() {
            for digest in digests {
                // Versions 1 and 2 are beyond the two kept before the current one.
                #expect(fixture.store.contains(digest) == (index >= 2), "version \(index + 1)")
            }
        }
        try state.restore(try state.versions()[2])
        #expect(state.value.body == Self.body(3))
    }

    @Test func withoutKeptVersionsOnlyTheCurrentOneIsStored() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "doc", default: Document())
        try state.root.body.set(Self.body(1))
        let first = try #require(try fixture.store.record(forKey: "statelens/h/doc")).references
        try state.root.body.set(Self.body(2))
        #expect(try state.versions().count == 1)
        #expect(first.allSatisfy { fixture.store.refCount(of: $0) == 0 })
        #expect(try fixture.store.keys(withPrefix: "statelens/v/").isEmpty)
    }
}

@Suite(.blocking) struct MigrationTests {
    struct Old: Codable, Sendable, Equatable { var name = "" ; var count = 0 }
    struct New: Codable, Sendable, Equatable { var title: String; var count: Int }

    static func storeOld(in fixture: Fixture) throws -> Record {
        let old = try LensStore(store: fixture.store, name: "app", default: Old())
        try old.root.set(Old(name: "legacy", count: 3))
        return try #require(try fixture.store.record(forKey: "statelens/h/app"))
    }

    @Test func anUndecodableRootWithoutMigrateIsUndecodableAndNothingIsOverwritten() throws {
        let fixture = try Fixture()
        let stored = try Self.storeOld(in: fixture)
        try fixture.reopen()
        #expect {
            _ = try LensStore(store: fixture.store, name: "app", default: New(title: "", count: 0))
        } throws: { error in
            guard case .undecodable = error as? LensError else { return false }
            return true
        }
        var failing = LensStore<New>.Configuration()
        failing.migrate = { _ in throw CocoaError(.coderReadCorrupt) }
        #expect {
            _ = try LensStore(store: fixture.store, name: "app", default: New(title: "", count: 0), configuration: failing)
        } throws: { error in
            guard case .undecodable = error as? LensError else { return false }
            return true
        }
        #expect(try fixture.store.record(forKey: "statelens/h/app") == stored)
    }

    @Test func migrateReceivesTheCanonicalJSONAndItsResultIsStoredByTheNextUpdate() throws {
        let fixture = try Fixture()
        let stored = try Self.storeOld(in: fixture)
        try fixture.reopen()
        var configuration = LensStore<New>.Configuration()
        configuration.migrate = { json in
            #expect(String(decoding: json, as: UTF8.self) == #"{"count":3,"name":"legacy"}"#)
            let old = try JSONDecoder().decode(Old.self, from: json)
            return New(title: old.name, count: old.count)
        }
        let state = try LensStore(store: fixture.store, name: "app", default: New(title: "", count: 0), configuration: configuration)
        #expect(state.value == New(title: "legacy", count: 3))
        #expect(try fixture.store.record(forKey: "statelens/h/app") == stored, "nothing is overwritten before an update")
        try state.root.count.update { $0 += 1 }
        try fixture.reopen()
        let reopened = try LensStore(store: fixture.store, name: "app", default: New(title: "", count: 0))
        #expect(reopened.value == New(title: "legacy", count: 4))
    }
}
