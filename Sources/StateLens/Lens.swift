import Foundation

/// A read-only view of one part of a ``LensStore``'s state: the type a component that only reads
/// its settings is given. It knows only its own value's type, never the root's.
///
/// Reading ``value`` costs a pointer read and the key path steps to the part; it never waits for a
/// writer. ``values()`` follows the part as it changes.
@dynamicMemberLookup
public struct Lens<Value: Sendable>: Sendable {
    let view: View<Value>

    init(view: View<Value>) {
        self.view = view
    }

    /// The part's value in the latest committed state (the default where nothing is stored).
    public var value: Value { view.read() }

    /// The lens of the member at `keyPath`: `settings.theme`.
    public subscript<T: Sendable>(dynamicMember keyPath: KeyPath<Value, T>) -> Lens<T> {
        Lens<T>(view: view.child(keyPath))
    }
}

extension Lens {
    /// The wrapped value, or `defaultValue` while the optional is nil.
    public func defaulting<Wrapped: Sendable>(to defaultValue: Wrapped) -> Lens<Wrapped> where Value == Wrapped? {
        Lens<Wrapped>(view: view.defaulting(to: defaultValue))
    }

    /// The lens of a member of an optional part: nil while the part is nil.
    public subscript<Wrapped, T: Sendable>(dynamicMember keyPath: KeyPath<Wrapped, T>) -> Lens<T?> where Value == Wrapped? {
        Lens<T?>(view: view.optionalChild(keyPath))
    }
}

extension Lens where Value: Equatable {
    /// The part's current value at once, then each value a commit gives it that differs from the
    /// one before, in commit order. A commit that leaves this part unchanged (one that changes only
    /// a sibling) yields nothing.
    ///
    /// Values are buffered without limit until read. Stop iterating (or drop the stream) to
    /// unsubscribe; the stream finishes when the state's last ``LensStore`` and lens are released.
    public func values() -> AsyncStream<Value> {
        Streams.values(view.observe)
    }
}

/// The streams lenses hand out.
enum Streams {
    static func values<Value: Equatable & Sendable>(_ observe: Access<Value>.Observe) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .unbounded)
        let stop = observe({ continuation.yield($0) }, { continuation.finish() }) { old, new, _ in
            if old != new { continuation.yield(new) }
        }
        continuation.onTermination = { _ in stop() }
        return stream
    }

    static func changes<Value: Equatable & Sendable>(_ observe: Access<Value>.Observe) -> AsyncStream<LensChange<Value>> {
        let (stream, continuation) = AsyncStream.makeStream(of: LensChange<Value>.self, bufferingPolicy: .unbounded)
        let stop = observe({ _ in }, { continuation.finish() }) { old, new, sequence in
            if old != new { continuation.yield(LensChange(old: old, new: new, sequence: sequence)) }
        }
        continuation.onTermination = { _ in stop() }
        return stream
    }
}
