// Owns: one live shared object per key in the process, never confused with its successor.
//
// Facade objects opened on the same thing share state: two `LensStore`s on one store and name one
// core, two persisters one change numbering, two `SyncClient`s one client engine, two archives on
// one directory one engine. The registry holds those objects weakly, so the state lives exactly as
// long as some facade object uses it. A key's slot stays taken from the object's creation until its
// `deinit` has called ``SharedObjects/release(_:)``: while an object is going away (finishing its
// streams, closing its store), a new one for the same key waits for it rather than overlapping it.
//
// Contract for a shared object: its `deinit` calls `release` with its key, and, when the key names
// a store, it holds that store, so the store's `ObjectIdentifier` is not reused while the slot is
// taken. `make` runs outside the registry's lock, with its key's slot marked as being made: two
// opens of one key at once make one object (the second waits for the first's), while opens of
// other keys go on (a store's recovery in one facade's open delays no other facade). `make` must
// not ask the registry for its own key.
import Foundation
import Synchronization

/// The registry of the state that facade objects share within the process (see the invariant above).
package enum SharedObjects {
    /// What a shared object is shared by: its type, and a store and name or a name (a path) alone.
    package struct Key: Hashable, Sendable {
        private let type: ObjectIdentifier
        private let store: ObjectIdentifier?
        private let name: String

        /// The `Object` of `name` on `store` (a facade's name, a client ID).
        package init<Object: AnyObject>(_ type: Object.Type, store: Store, name: String) {
            self.type = ObjectIdentifier(type)
            self.store = ObjectIdentifier(store)
            self.name = name
        }

        /// The `Object` of `name` alone (a store directory's path).
        package init<Object: AnyObject>(_ type: Object.Type, name: String) {
            self.type = ObjectIdentifier(type)
            self.store = nil
            self.name = name
        }
    }

    /// A key's slot: its object being made, or made and held weakly (nil once it is going away).
    private struct Slot {
        var isBeingMade: Bool
        weak var object: AnyObject?
    }

    private static let slots = Mutex<[Key: Slot]>([:])

    /// What a look at a key's slot found.
    private enum Lookup<Object> {
        case existing(Object)
        case mine
        case busy
    }

    /// How long a caller first waits between looks at a slot whose object is being made or going
    /// away; the wait doubles up to ``longestPoll`` (a store's recovery can take seconds).
    private static let firstPoll: useconds_t = 200
    private static let longestPoll: useconds_t = 10_000

    /// The live object for `key` when `accept` takes it, nil when it refuses it; else a new one from
    /// `make`, registered under `key`. Waits while an earlier object of `key` is still going away.
    package static func object<Object: AnyObject & Sendable>(
        for key: Key, accept: (Object) -> Bool = { _ in true }, make: () throws -> Object
    ) rethrows -> Object? {
        var poll = firstPoll
        while true {
            // A strong reference to an existing object leaves the lock with the outcome: were it the
            // last one and dropped inside, the object's deinit would take this lock again.
            let outcome: Lookup<Object> = slots.withLock { slots in
                guard let slot = slots[key] else {
                    slots[key] = Slot(isBeingMade: true)
                    return .mine
                }
                guard let object = slot.object else { return .busy }
                // The key names the type, so the slot holds an `Object`.
                return .existing(unsafeDowncast(object, to: Object.self))
            }
            switch outcome {
            case .existing(let object): return accept(object) ? object : nil
            case .mine: return try fill(key, with: make)
            case .busy:
                usleep(poll)
                poll = min(poll * 2, longestPoll)
            }
        }
    }

    /// Makes the object for `key`, whose slot the caller has marked as being made, and registers
    /// it; frees the slot when `make` throws, so the next open tries afresh.
    private static func fill<Object: AnyObject & Sendable>(_ key: Key, with make: () throws -> Object) rethrows -> Object {
        let object: Object
        do {
            object = try make()
        } catch {
            slots.withLock { _ = $0.removeValue(forKey: key) }
            throw error
        }
        slots.withLock { $0[key] = Slot(isBeingMade: false, object: object) }
        return object
    }

    /// The live object for `key`, or a new one from `make`.
    package static func object<Object: AnyObject & Sendable>(for key: Key, make: () throws -> Object) rethrows -> Object {
        // Without `accept`, nothing is refused.
        try object(for: key, accept: { _ in true }, make: make)!
    }

    /// Frees `key`'s slot: called by its object's `deinit`, last. Leaves a slot whose object is
    /// still alive (an object that was never registered going away).
    package static func release(_ key: Key) {
        slots.withLock { slots in
            if let slot = slots[key], slot.object == nil, !slot.isBeingMade { slots[key] = nil }
        }
    }
}
