import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// The one registry of the state facade objects share: one live object per key, made once, made
/// anew only after the last one has finished going away.
@Suite(.blocking) struct SharedObjectsTests {
    /// A shared object that counts itself and can take its time going away.
    final class Probe: Sendable {
        let key: SharedObjects.Key
        private let onDeinit: @Sendable () -> Void

        init(key: SharedObjects.Key, onDeinit: @escaping @Sendable () -> Void = {}) {
            self.key = key
            self.onDeinit = onDeinit
        }

        deinit {
            onDeinit()
            SharedObjects.release(key)
        }
    }

    final class OtherProbe: Sendable {
        let key: SharedObjects.Key
        init(key: SharedObjects.Key) { self.key = key }
        deinit { SharedObjects.release(key) }
    }

    /// A name no other test uses: the registry is the process's.
    static func uniqueName() -> String { "shared-objects-test/" + UUID().uuidString }

    @Test func oneKeyOneObjectMadeOnce() {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let makes = Atomic(0)
        let make = { makes.add(1, ordering: .relaxed); return Probe(key: key) }
        let first = SharedObjects.object(for: key, make: make)
        let second = SharedObjects.object(for: key, make: make)
        #expect(ObjectIdentifier(first) == ObjectIdentifier(second))
        #expect(makes.load(ordering: .relaxed) == 1)
    }

    @Test func typeStoreAndNameEachSeparateKeys() throws {
        let directory = TemporaryDirectory()
        let one = try Store(at: directory.url.appendingPathComponent("one"))
        let two = try Store(at: directory.url.appendingPathComponent("two"))
        let name = Self.uniqueName()
        let keys = [
            SharedObjects.Key(Probe.self, store: one, name: name),
            SharedObjects.Key(Probe.self, store: two, name: name),
            SharedObjects.Key(Probe.self, store: one, name: name + "x"),
            SharedObjects.Key(Probe.self, name: name),
        ]
        let probes = keys.map { key in SharedObjects.object(for: key) { Probe(key: key) } }
        #expect(Set(probes.map(ObjectIdentifier.init)).count == keys.count)
        let otherKey = SharedObjects.Key(OtherProbe.self, store: one, name: name)
        #expect(otherKey != keys[0])
        let other = SharedObjects.object(for: otherKey) { OtherProbe(key: otherKey) }
        #expect(other.key == otherKey)
        withExtendedLifetime(probes) {}
    }

    @Test func theLastUseGoneTheNextUseMakesANewObject() {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let deinits = Atomic(0)
        var first: Probe? = SharedObjects.object(for: key) { Probe(key: key) { deinits.add(1, ordering: .relaxed) } }
        do {
            let again = SharedObjects.object(for: key) { Probe(key: key) }
            #expect(ObjectIdentifier(again) == ObjectIdentifier(first!))
        }
        first = nil
        #expect(deinits.load(ordering: .relaxed) == 1)
        let makes = Atomic(0)
        let second = SharedObjects.object(for: key) { makes.add(1, ordering: .relaxed); return Probe(key: key) }
        #expect(makes.load(ordering: .relaxed) == 1)
        withExtendedLifetime(second) {}
    }

    /// While an object is going away (closing its store, say), a new one for its key is made only
    /// once it has gone: never two at once.
    @Test func aNewObjectWaitsForTheDepartingOne() async throws {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let departing = Atomic(false), departed = Atomic(false)
        let first = Mutex<Probe?>(SharedObjects.object(for: key) {
            Probe(key: key) {
                departing.store(true, ordering: .sequentiallyConsistent)
                Thread.sleep(forTimeInterval: 0.2)
                departed.store(true, ordering: .sequentiallyConsistent)
            }
        })
        let dropper = Thread { first.withLock { $0 = nil } }
        let sawDeparted = Mutex<Bool?>(nil)
        let opener = Thread {
            while !departing.load(ordering: .sequentiallyConsistent) { usleep(100) }
            let second = SharedObjects.object(for: key) {
                sawDeparted.withLock { $0 = departed.load(ordering: .sequentiallyConsistent) }
                return Probe(key: key)
            }
            withExtendedLifetime(second) {}
        }
        opener.start()
        dropper.start()
        while sawDeparted.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sawDeparted.withLock { $0 } == true)
    }

    @Test func aRefusedObjectIsNilAndStaysShared() {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let first = SharedObjects.object(for: key) { Probe(key: key) }
        let refused = SharedObjects.object(for: key, accept: { _ in false }) { Probe(key: key) }
        #expect(refused == nil)
        let accepted = SharedObjects.object(for: key, accept: { $0 === first }) { Probe(key: key) }
        #expect(accepted.map(ObjectIdentifier.init) == ObjectIdentifier(first))
    }

    /// An object that was never registered going away leaves the live one's slot alone.
    @Test func anUnregisteredObjectsReleaseKeepsTheLiveSlot() {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let live = SharedObjects.object(for: key) { Probe(key: key) }
        do { _ = Probe(key: key) }
        let found = SharedObjects.object(for: key) { Probe(key: key) }
        #expect(ObjectIdentifier(found) == ObjectIdentifier(live))
    }

    /// A slow make (a store's recovery) holds up opens of its own key only: another key's object is
    /// made meanwhile, and a second open of the slow key gets the one object made for it.
    ///
    /// The slow make lasts until the other key's object is made. Were that open to wait for the slow
    /// make, the make gives up waiting after `patience` and the test fails on the order instead of
    /// hanging; a loaded machine only makes the passing run slower (everything runs on threads of
    /// its own, and no step waits for a fixed time).
    @Test func aSlowMakeDelaysOnlyItsOwnKey() throws {
        let patience: DispatchTimeInterval = .seconds(300)
        let slowKey = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let otherKey = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        let making = DispatchSemaphore(value: 0), otherMade = DispatchSemaphore(value: 0)
        let makes = Atomic(0), otherMadeDuringTheSlowMake = Atomic(false), slowKeyOpenedMeanwhile = Atomic(false)
        let made = Mutex<[Probe]>([])
        let make: @Sendable () -> Probe = {
            makes.add(1, ordering: .relaxed)
            making.signal()
            otherMadeDuringTheSlowMake.store(otherMade.wait(timeout: .now() + patience) == .success, ordering: .relaxed)
            return Probe(key: slowKey)
        }
        let finished = DispatchGroup()
        func thread(_ body: @escaping @Sendable () -> Void) -> Thread {
            finished.enter()
            return Thread { body(); finished.leave() }
        }
        let openers = (0 ..< 2).map { _ in
            thread { let probe = SharedObjects.object(for: slowKey, make: make); made.withLock { $0.append(probe) } }
        }
        openers[0].start()
        #expect(making.wait(timeout: .now() + patience) == .success, "the first open of the slow key started its make")
        openers[1].start()
        thread {
            let other = SharedObjects.object(for: otherKey) { Probe(key: otherKey) }
            slowKeyOpenedMeanwhile.store(made.withLock { !$0.isEmpty }, ordering: .relaxed)
            otherMade.signal()
            withExtendedLifetime(other) {}
        }.start()
        try #require(finished.wait(timeout: .now() + .seconds(900)) == .success, "every open returned")

        let otherFirst = otherMadeDuringTheSlowMake.load(ordering: .relaxed), slowKeyEarly = slowKeyOpenedMeanwhile.load(ordering: .relaxed)
        #expect(otherFirst, "the other key's object was made while the slow make ran")
        #expect(!slowKeyEarly, "no open of the slow key returned before its make did")
        let both = made.withLock { $0 }
        #expect(both.count == 2 && ObjectIdentifier(both[0]) == ObjectIdentifier(both[1]))
        #expect(makes.load(ordering: .relaxed) == 1)
    }

    struct MakeFailed: Error {}

    /// A make that throws leaves no slot behind: the error reaches its caller, the next open makes anew.
    @Test func aFailedMakeFreesTheSlot() throws {
        let key = SharedObjects.Key(Probe.self, name: Self.uniqueName())
        #expect(throws: MakeFailed.self) { _ = try SharedObjects.object(for: key) { () throws -> Probe in throw MakeFailed() } }
        let makes = Atomic(0)
        let probe = SharedObjects.object(for: key) { makes.add(1, ordering: .relaxed); return Probe(key: key) }
        #expect(makes.load(ordering: .relaxed) == 1)
        #expect(probe.key == key)
    }
}
