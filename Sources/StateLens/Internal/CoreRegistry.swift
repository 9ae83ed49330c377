import ContentStore
import Foundation
import Synchronization

/// The live cores by store object and name, held weakly: two LensStores opened on the same store
/// and name share one core (one value, one set of observers). A core keeps its store alive, so a
/// store's `ObjectIdentifier` cannot be reused while its entry is live.
enum CoreRegistry {
    private struct Key: Hashable {
        let store: ObjectIdentifier
        let name: String
    }

    private struct Slot {
        weak var core: (any AnyObject & Sendable)?
    }

    private static let slots = Mutex<[Key: Slot]>([:])

    /// The live core for `store` and `name`, or a new one from `make`. Creation runs under the lock,
    /// so two opens at once load the state once. A live core of another `Root` type for the same
    /// name is not shared: the new core is independent (both still commit safely, each building on
    /// the head record its transaction sees).
    static func core<Root>(store: Store, name: String, make: () throws -> LensCore<Root>) throws -> LensCore<Root> {
        let key = Key(store: ObjectIdentifier(store), name: name)
        // The strong reference to an existing core leaves the lock with the result: were it the
        // last one and dropped inside, the core's deinit would take this lock again.
        let (core, existing): (LensCore<Root>, (any AnyObject & Sendable)?) = try slots.withLock { slots in
            if let existing = slots[key]?.core {
                return (try (existing as? LensCore<Root>) ?? make(), existing)
            }
            let core = try make()
            slots[key] = Slot(core: core)
            return (core, nil)
        }
        withExtendedLifetime(existing) {}
        return core
    }

    /// Forgets the entry of a core that has gone away.
    static func remove(store: Store, name: String) {
        let key = Key(store: ObjectIdentifier(store), name: name)
        slots.withLock { slots in
            if let slot = slots[key], slot.core == nil { slots[key] = nil }
        }
    }
}
