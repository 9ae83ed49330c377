import Foundation
import StateLens
import Testing
import TestThreads

@Suite(.blocking) struct OptionalPartTests {
    @Test func aLensBelowANilOptionalReadsNilOrTheDefault() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        #expect(state.root.protection.enabled.value == nil)
        #expect(state.root.protection.defaulting(to: Protection(enabled: true, passcode: nil)).enabled.value == true)
        #expect(state.root.readOnly.protection.enabled.value == nil)
        #expect(state.root.readOnly.protection.defaulting(to: Protection(enabled: false, passcode: "1")).passcode.value == "1")
    }

    @Test func writingBelowANilOptionalWithoutDefaultIsMissingParentAndChangesNothing() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try state.root.counter.set(1)
        #expect {
            try state.root.protection.enabled.set(true)
        } throws: { error in
            guard case let .missingParent(path) = error as? LensError else { return false }
            return path == "root.protection"
        }
        #expect(state.value.protection == nil)
        #expect(try state.versions().map(\.sequence) == [1])
    }

    @Test func writingThroughADefaultPromotesItAndThePromotionSurvivesReopening() throws {
        let fixture = try Fixture()
        let fallback = Protection(enabled: false, passcode: "0000")
        do {
            let state = try LensStore(store: fixture.store, name: "account", default: Account())
            try state.root.protection.defaulting(to: fallback).enabled.set(true)
            #expect(state.value.protection == Protection(enabled: true, passcode: "0000"))
            // Below it now, no default is needed.
            try state.root.protection.passcode.set("1234")
        }
        try fixture.reopen()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        #expect(state.value.protection == Protection(enabled: true, passcode: "1234"))
    }

    @Test func aWriteThatLeavesTheDefaultStoresNothing() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        let settings = state.root.protection.defaulting(to: Protection(enabled: false, passcode: nil))
        try settings.enabled.set(false)
        try settings.update { _ in }
        #expect(state.value.protection == nil, "defaults are never stored on their own")
        #expect(try state.versions().isEmpty)
    }

    @Test func settingAnOptionalPartToNilRemovesIt() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try state.root.protection.set(Protection(enabled: true, passcode: "1"))
        try state.root.protection.passcode.set(.some(nil))
        #expect(state.value.protection == Protection(enabled: true, passcode: nil))
        try state.root.protection.set(nil)
        #expect(state.value.protection == nil)
    }
}
