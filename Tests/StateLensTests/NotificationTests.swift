import Foundation
import StateLens
import Synchronization
import Testing
import TestThreads

@Suite struct NotificationTests {
    @Test func valuesYieldsTheCurrentValueThenEachChangeAndSiblingsHearNothing() async throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try await state.root.counter.set(1)
        let counter = Collector(state.root.counter.values())
        let email = Collector(state.root.credentials.email.values())
        let password = Collector(state.root.credentials.password.values())
        let credentials = Collector(state.root.credentials.values())
        let whole = Collector(state.root.values())
        _ = await counter.wait(for: 1)
        for _ in 0 ..< 3 { try await state.root.counter.update { $0 += 1 } }
        try await state.root.credentials.email.set("e@x")

        #expect(await counter.wait(for: 4) == [1, 2, 3, 4])
        #expect(await email.wait(for: 2) == ["", "e@x"])
        #expect(await credentials.wait(for: 2).map(\.email) == ["", "e@x"])
        #expect(await whole.wait(for: 5).map(\.counter) == [1, 2, 3, 4, 4])
        // Give a wrong notification time to arrive before checking there is none.
        try await Task.sleep(for: .milliseconds(100))
        #expect(counter.elements.count == 4, "the email change did not notify the counter")
        #expect(email.elements.count == 2, "counter changes did not notify the email")
        #expect(password.elements == [""], "an unchanged sibling is never notified")
        counter.cancel(); email.cancel(); password.cancel(); credentials.cancel(); whole.cancel()
    }

    @Test func changesCarryOldNewAndSequenceInCommitOrderUnderConcurrentUpdates() async throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        let changes = Collector(state.root.counter.changes())
        let threads = 8, rounds = 20
        try await onThreads(threads) { _ in
            for _ in 0 ..< rounds { try state.root.counter.update { $0 += 1 } }
        }
        let heard = await changes.wait(for: threads * rounds)
        #expect(heard.count == threads * rounds)
        // Commit order: sequences rise by one, and each change starts where the one before ended.
        for (index, change) in heard.enumerated() {
            #expect(change.sequence == UInt64(index + 1))
            #expect(change.old == index && change.new == index + 1)
        }
        #expect(state.value.counter == threads * rounds)
        changes.cancel()
    }

    @Test func aChangeOfAnOptionalPartNotifiesLensesBelowIt() async throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        let enabled = Collector(state.root.protection.enabled.values())
        let defaulted = Collector(state.root.protection.defaulting(to: Protection(enabled: false, passcode: nil)).enabled.values())
        _ = await enabled.wait(for: 1)
        try await state.root.protection.set(Protection(enabled: true, passcode: nil))
        try await state.root.protection.passcode.set("9")   // enabled unchanged: no notification
        try await state.root.protection.set(nil)
        #expect(await enabled.wait(for: 3) == [nil, true, nil])
        #expect(await defaulted.wait(for: 3) == [false, true, false])
        try await Task.sleep(for: .milliseconds(50))
        #expect(enabled.elements.count == 3)
        enabled.cancel(); defaulted.cancel()
    }
}

@Suite(.blocking) struct ConcurrencyTests {
    /// 16 writers each increment their own field (and the total, in the same update) while 4
    /// readers check that every value they read is whole: the fields always sum to the total.
    @Test func sixteenWritersAndFourReadersSeeNoTornValueAndLoseNoUpdate() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        let writers = 16, rounds = 25
        let done = Atomic<Int>(0)
        let reads = Atomic<Int>(0)
        let torn = Atomic<Int>(0)
        try onThreads(writers + 4) { index in
            if index < writers {
                defer { done.add(1, ordering: .releasing) }
                let field = state.root.fields
                for _ in 0 ..< rounds {
                    try state.root.update { root in
                        root.fields[index] += 1
                        root.total += 1
                    }
                    _ = field
                }
            } else {
                var last = 0
                while done.load(ordering: .acquiring) < writers {
                    let value = state.value
                    if value.fields.reduce(0, +) != value.total || value.total < last { torn.add(1, ordering: .relaxed) }
                    last = value.total
                    reads.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(torn.load(ordering: .relaxed) == 0)
        #expect(reads.load(ordering: .relaxed) > 0)
        #expect(state.value.fields == [Int](repeating: rounds, count: writers))
        #expect(state.value.total == writers * rounds)
        #expect(try state.versions().first?.sequence == UInt64(writers * rounds), "one commit per update")
        try fixture.reopen()
        let reopened = try LensStore(store: fixture.store, name: "account", default: Account())
        #expect(reopened.value.total == writers * rounds)
    }

    /// A reader never waits for a writer: while an update's body is held up (and with it the
    /// store's commit), `value` still answers at once, with the last committed value.
    @Test func readersAreNeverBlockedByAWriter() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try state.root.counter.set(1)
        let inBody = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let writer = Thread {
            try? state.root.counter.update { counter in
                inBody.signal()
                release.wait()
                counter = 2
            }
        }
        writer.start()
        inBody.wait()
        // The reads run on a thread of their own while the writer is held; a read that waited for
        // the writer would wait until the writer is released after `patience`, and the test fails
        // on the order rather than hanging (no wall-clock bound on a loaded machine).
        let readsDone = DispatchSemaphore(value: 0)
        let readValues = Mutex<[Int]>([])
        Thread {
            for _ in 0 ..< 10_000 { let counter = state.value.counter; readValues.withLock { $0.append(counter) } }
            readsDone.signal()
        }.start()
        let readWhileHeld = readsDone.wait(timeout: .now() + .seconds(300)) == .success
        release.signal()
        #expect(readWhileHeld, "the reads finished while the writer held its transaction")
        if !readWhileHeld { readsDone.wait() }
        #expect(readValues.withLock { $0.count == 10_000 && $0.allSatisfy { $0 == 1 } })
        while state.value.counter != 2 { usleep(1000) }
    }

    /// Sub-lenses of different fields updated from many threads: each update sees the latest value.
    @Test func updatesThroughDifferentSubLensesAreSerialized() throws {
        let fixture = try Fixture()
        let state = try LensStore(store: fixture.store, name: "account", default: Account())
        try onThreads(8) { index in
            let lens = state.root.fields
            for _ in 0 ..< 10 {
                try lens.update { $0[index] += 1 }
                try state.root.counter.update { $0 += 1 }
            }
        }
        #expect(Array(state.value.fields.prefix(8)) == [Int](repeating: 10, count: 8))
        #expect(state.value.counter == 80)
    }
}
