import Foundation
import StateLens
import Testing
import TestThreads

@Suite(.blocking) struct LensStoreTests {
    @Test func readsTheDefaultWhileNothingIsStored() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        #expect(state.value == Account())
        #expect(state.root.counter.value == 0)
        #expect(try state.versions().isEmpty)
        #expect(try fixture.store.keys(withPrefix: "statelens/").isEmpty, "opening writes nothing")
    }

    @Test func setAndUpdateThroughSubLensesAreDurableAndSurviveReopening() throws {
        let fixture = try Fixture()
        do {
            let state = try LensStore(store: fixture.store, name: "account", default: Account())
            try state.root.credentials.email.set("smith@example.com")
            let returned = try state.root.counter.update { counter -> String in
                counter += 41
                return "body result"
            }
            #expect(returned == "body result")
            try state.root.counter.update { $0 += 1 }
            #expect(state.value.credentials.email == "smith@example.com")
            #expect(state.root.counter.value == 42)
            #expect(try state.versions().map(\.sequence) == [3])
        }
        try fixture.reopen()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        #expect(state.value.credentials.email == "smith@example.com")
        #expect(state.value.counter == 42)
    }

    @Test func aLensKnowsOnlyItsOwnType() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        // A component is handed the lens of its part and never sees `Account`.
        func authenticate(_ credentials: MutableLens<Credentials>) throws {
            try credentials.set(Credentials(email: "a@b.c", password: "secret"))
        }
        func display(_ credentials: Lens<Credentials>) -> String { credentials.email.value }
        try authenticate(state.root.credentials)
        #expect(display(state.root.credentials.readOnly) == "a@b.c")
        #expect(state.root.readOnly.credentials.password.value == "secret")
    }

    @Test func aThrowingBodyOrAnUnchangedRootCommitsNothing() throws {
        struct Refused: Error {}
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try state.root.counter.set(1)
        #expect(throws: Refused.self) {
            try state.root.update { root in
                root.counter = 99
                throw Refused()
            }
        }
        try state.root.counter.set(1)
        try state.root.update { _ in }
        try state.root.set(state.value)
        #expect(state.value.counter == 1)
        #expect(try state.versions().map(\.sequence) == [1], "one commit only")
    }

    @Test func writingTheDefaultOfANeverStoredStateStoresNothing() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try state.root.set(Account())
        try state.root.counter.set(0)
        #expect(try state.versions().isEmpty)
        #expect(try fixture.store.keys(withPrefix: "statelens/").isEmpty)
    }

    @Test(arguments: ["", String(repeating: "n", count: 257), "a\u{0}b"])
    func invalidNamesAreRefused(name: String) throws {
        let fixture = try Fixture()
        #expect {
            _ = try LensStore(store: fixture.store, name: name, default: Account())
        } throws: { error in
            guard case .invalidName = error as? LensError else { return false }
            return true
        }
        #expect(try fixture.store.keys(withPrefix: "").isEmpty)
    }

    @Test(arguments: ["x", String(repeating: "é", count: 127), "../../etc/passwd", "a/v/3:b", "名前 with spaces"])
    func anyOtherNameWorksAndNamesAreIndependent(name: String) throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: name, default: Account())
        let other = try LensStore(store: fixture.store, name: name + "/", default: Account())
        try state.root.counter.set(7)
        try other.root.counter.set(8)
        try fixture.reopen()
        #expect(try LensStore(store: fixture.store, name: name, default: Account()).value.counter == 7)
        #expect(try LensStore(store: fixture.store, name: name + "/", default: Account()).value.counter == 8)
    }

    @Test func twoLensStoresOnOneNameShareStateAndBothNotify() async throws {
        let fixture = try Fixture()
        let first = try LensStore(store: fixture.store, name: "shared", default: Account())
        let second = try LensStore(store: fixture.store, name: "shared", default: Account())
        let heard = Collector(second.root.counter.values())
        try await first.root.counter.set(5)
        #expect(second.value.counter == 5)
        try await second.root.counter.update { $0 += 1 }
        #expect(first.value.counter == 6)
        #expect(await heard.wait(for: 3) == [0, 5, 6])
        heard.cancel()
    }

    @Test func resetRemovesTheValueAndNotifies() async throws {
        let fixture = try Fixture()
        var defaults = Account()
        defaults.counter = 100
        do {
            let state = try LensStore(store: fixture.store, name: "account", default: defaults)
            let heard = Collector(state.root.counter.values())
            try await state.root.counter.set(1)
            try await state.reset()
            #expect(state.value == defaults)
            try await state.reset()   // nothing stored: no commit
            #expect(try await state.versions().map(\.sequence) == [2])
            #expect(await heard.wait(for: 3) == [100, 1, 100])
            heard.cancel()
        }
        try fixture.reopen()
        let reopened = try LensStore(store: fixture.store, name: "account", default: defaults)
        #expect(reopened.value == defaults)
        let head = try #require(try await fixture.store.record(forKey: "statelens/h/account"))
        #expect(head.references.isEmpty, "no blob is kept for a reset state")
    }

    @Test func asyncTwinsCommitLikeTheBlockingCalls() async throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account(), configuration: {
            var configuration = LensStore<Account>.Configuration()
            configuration.keptVersions = 3
            return configuration
        }())
        try await state.root.counter.set(3)
        let result = try await state.root.counter.update { counter -> Int in
            counter *= 2
            return counter
        }
        #expect(result == 6)
        #expect(state.value.counter == 6)
        let versions = try await state.versions()
        #expect(versions.map(\.sequence) == [2, 1])
        try await state.restore(versions[1])
        #expect(state.value.counter == 3)
        try await state.reset()
        #expect(state.value.counter == 0)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await state.root.counter.set(1000)
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(state.value.counter == 0)
    }
}
