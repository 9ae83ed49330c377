import ContentStore
import Foundation

/// How a lens reaches its value, as closures composed from the root down: the lens types know only
/// their `Value`, never the root's type (POSLens's decoupling), so each level wraps its parent's
/// closures with one key path or optional step.
struct Access<Value: Sendable>: Sendable {
    /// Reads the value from the latest published version.
    typealias Read = @Sendable () -> Value
    /// Runs `body` on the value inside one update of the whole state.
    typealias Modify = @Sendable (_ body: (inout Value) throws -> Void) throws -> Void
    /// Calls `initial` with the current value, then `deliver` with the old and new value of every
    /// committed version, in commit order; returns what stops it. `finish` is called when the state
    /// goes away first.
    typealias Observe = @Sendable (
        _ initial: (Value) -> Void,
        _ finish: @escaping @Sendable () -> Void,
        _ deliver: @escaping @Sendable (_ old: Value, _ new: Value, _ sequence: UInt64) -> Void
    ) -> @Sendable () -> Void

    /// The store the state lives in: its I/O threads run the async twins.
    let store: Store
    /// The lens's place for messages, as `root.settings.theme`.
    let path: LensPath
    let read: Read
    let modify: Modify
    let observe: Observe

    /// The part at `keyPath`. Key paths are immutable once formed, so sharing one between threads
    /// is safe (hence `nonisolated(unsafe)`).
    func child<T: Sendable>(_ keyPath: WritableKeyPath<Value, T>) -> Access<T> {
        nonisolated(unsafe) let keyPath = keyPath
        let parent = self
        return Access<T>(
            store: store,
            path: path.appending(keyPath),
            read: { parent.read()[keyPath: keyPath] },
            modify: { body in try parent.modify { value in try body(&value[keyPath: keyPath]) } },
            observe: parent.mapObserve { $0[keyPath: keyPath] })
    }

    func mapObserve<T>(_ transform: @escaping @Sendable (Value) -> T) -> Access<T>.Observe {
        view.mapObserve(transform)
    }

    /// The reading half, for a ``Lens``.
    var view: View<Value> { View(path: path, read: read, observe: observe) }
}

/// The reading half of an ``Access``: what a read-only ``Lens`` holds.
struct View<Value: Sendable>: Sendable {
    let path: LensPath
    let read: Access<Value>.Read
    let observe: Access<Value>.Observe

    /// The part at `keyPath` (see ``Access/child(_:)``).
    func child<T: Sendable>(_ keyPath: KeyPath<Value, T>) -> View<T> {
        nonisolated(unsafe) let keyPath = keyPath
        let read = self.read
        return View<T>(path: path.appending(keyPath), read: { read()[keyPath: keyPath] }, observe: mapObserve { $0[keyPath: keyPath] })
    }

    /// Below an optional (see ``Access/optionalChild(_:)``).
    func optionalChild<Wrapped, T: Sendable>(_ keyPath: KeyPath<Wrapped, T>) -> View<T?> where Value == Wrapped? {
        nonisolated(unsafe) let keyPath = keyPath
        let read = self.read
        return View<T?>(path: path.appending(keyPath), read: { read()?[keyPath: keyPath] }, observe: mapObserve { $0?[keyPath: keyPath] })
    }

    /// Below an optional, with a default (see ``Access/defaulting(to:)``).
    func defaulting<Wrapped: Sendable>(to defaultValue: Wrapped) -> View<Wrapped> where Value == Wrapped? {
        let read = self.read
        return View<Wrapped>(path: path, read: { read() ?? defaultValue }, observe: mapObserve { $0 ?? defaultValue })
    }

    func mapObserve<T>(_ transform: @escaping @Sendable (Value) -> T) -> Access<T>.Observe {
        let observe = self.observe
        return { initial, finish, deliver in
            observe({ initial(transform($0)) }, finish) { old, new, sequence in
                deliver(transform(old), transform(new), sequence)
            }
        }
    }
}

extension Access {
    /// Below an optional: reads nil while the optional is nil; writing then is `missingParent`.
    func optionalChild<Wrapped, T: Sendable>(_ keyPath: WritableKeyPath<Wrapped, T>) -> Access<T?> where Value == Wrapped? {
        nonisolated(unsafe) let keyPath = keyPath
        let parent = self
        return Access<T?>(
            store: store,
            path: path.appending(keyPath),
            read: { parent.read()?[keyPath: keyPath] },
            modify: { body in
                try parent.modify { wrapped in
                    guard var unwrapped = wrapped else { throw LensError.missingParent(path: parent.path.description) }
                    var part: T? = unwrapped[keyPath: keyPath]
                    try body(&part)
                    // nil cannot be stored in a non-optional member: the member is left as it was.
                    guard let part else { return }
                    unwrapped[keyPath: keyPath] = part
                    wrapped = unwrapped
                }
            },
            observe: parent.mapObserve { $0?[keyPath: keyPath] })
    }

    /// Below an optional, reading `defaultValue` while it is nil; a write stores the default with
    /// the change (promotion), unless it leaves the value equal to the default.
    func defaulting<Wrapped: Sendable>(to defaultValue: Wrapped) -> Access<Wrapped> where Value == Wrapped? {
        let parent = self
        return Access<Wrapped>(
            store: store,
            path: path,
            read: { parent.read() ?? defaultValue },
            modify: { body in
                try parent.modify { wrapped in
                    var value = wrapped ?? defaultValue
                    try body(&value)
                    if wrapped == nil, Equality.equal(value, defaultValue) { return }
                    wrapped = value
                }
            },
            observe: parent.mapObserve { $0 ?? defaultValue })
    }
}

/// `==` for values whose type is only known to be `Equatable` at run time.
enum Equality {
    /// Whether `lhs == rhs`; false when the type is not `Equatable`.
    static func equal<T>(_ lhs: T, _ rhs: T) -> Bool {
        guard let lhs = lhs as? any Equatable else { return false }
        return same(lhs, rhs)
    }

    /// Whether `value == other` where `other` is any value; false when the types differ.
    static func equal<T>(_ value: T, any other: Any) -> Bool {
        guard let value = value as? any Equatable else { return false }
        return same(value, other)
    }

    private static func same<E: Equatable>(_ value: E, _ other: Any) -> Bool {
        guard let other = other as? E else { return false }
        return value == other
    }
}

/// A lens's place, as `root.settings.theme`, for messages. Described only when a message needs it:
/// describing a key path reads type metadata, too slow for every lens an update derives.
struct LensPath: Sendable, CustomStringConvertible {
    private let describe: @Sendable () -> String

    static let root = LensPath { "root" }

    private init(_ describe: @escaping @Sendable () -> String) {
        self.describe = describe
    }

    var description: String { describe() }

    /// This path followed by `keyPath`'s members (`.member` of `\Type.member`).
    func appending<Root, T>(_ keyPath: KeyPath<Root, T>) -> LensPath {
        nonisolated(unsafe) let keyPath = keyPath
        let parent = describe
        return LensPath {
            let text = String(describing: keyPath)
            guard let dot = text.firstIndex(of: ".") else { return parent() + "." + text }
            return parent() + String(text[dot...])
        }
    }
}
