import Foundation

/// A view of one part of a ``LensStore``'s state that can also change it: the type a component
/// that owns its settings is given. It knows only its own value's type, never the root's.
///
/// Every ``set(_:)`` and ``update(_:)`` is one atomic, durable commit of the whole state, made
/// one at a time: an update's body sees the latest value. A body that throws, or leaves the state
/// equal to what it was, commits nothing and notifies no one. Readers never wait for a writer.
@dynamicMemberLookup
public struct MutableLens<Value: Sendable>: Sendable {
    let access: Access<Value>

    init(access: Access<Value>) {
        self.access = access
    }

    /// The part's value in the latest committed state (the default where nothing is stored).
    public var value: Value { access.read() }

    /// The same part, read-only: for a component that must not change it.
    public var readOnly: Lens<Value> { Lens(view: access.view) }

    /// The lens of the member at `keyPath`: `settings.theme`.
    public subscript<T: Sendable>(dynamicMember keyPath: WritableKeyPath<Value, T>) -> MutableLens<T> {
        MutableLens<T>(access: access.child(keyPath))
    }

    /// Replaces the part's value, as one durable commit (none if it is unchanged).
    ///
    /// - Throws: ``LensError/missingParent(path:)`` below a nil optional without a default;
    ///   ``LensError/undecodable(_:)`` when the stored state was changed by another process into
    ///   something this root type cannot read; `StoreError` from the store.
    public func set(_ newValue: Value) throws {
        try access.modify { $0 = newValue }
    }

    /// Runs `body` on the latest value and commits what it leaves, as one durable commit (none if
    /// `body` throws or leaves the state unchanged). Updates run one at a time, so `body` sees every
    /// update made before it; keep it short and free of other effects.
    ///
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw, or the errors of ``set(_:)``.
    @discardableResult
    public func update<T>(_ body: (inout Value) throws -> T) throws -> T {
        var result: T?
        try access.modify { result = try body(&$0) }
        guard let result else {
            // `modify` runs `body` whenever it does not throw: unreachable.
            throw LensError.missingParent(path: access.path.description)
        }
        return result
    }
}

extension MutableLens {
    /// The wrapped value, or `defaultValue` while the optional is nil. A write through this lens
    /// stores the default with the change made to it (promotion); a write that leaves it equal to
    /// the default stores nothing. Defaults are never stored on their own.
    public func defaulting<Wrapped: Sendable>(to defaultValue: Wrapped) -> MutableLens<Wrapped> where Value == Wrapped? {
        MutableLens<Wrapped>(access: access.defaulting(to: defaultValue))
    }

    /// The lens of a member of an optional part: it reads nil while the part is nil, and writing
    /// then throws ``LensError/missingParent(path:)`` and changes nothing. Setting nil through it
    /// leaves a non-optional member as it is.
    public subscript<Wrapped, T: Sendable>(dynamicMember keyPath: WritableKeyPath<Wrapped, T>) -> MutableLens<T?> where Value == Wrapped? {
        MutableLens<T?>(access: access.optionalChild(keyPath))
    }
}

extension MutableLens where Value: Equatable {
    /// The part's current value at once, then each value a commit gives it, in commit order
    /// (see ``Lens/values()``).
    public func values() -> AsyncStream<Value> {
        Streams.values(access.observe)
    }

    /// Each committed change of the part, with its value before and after and the commit's
    /// sequence, in commit order. Commits that leave the part unchanged are not reported.
    /// Buffered without limit until read; stop iterating to unsubscribe.
    public func changes() -> AsyncStream<LensChange<Value>> {
        Streams.changes(access.observe)
    }
}

extension MutableLens {
    /// ``set(_:)`` for async code: the update runs on the store's I/O threads (as `Store`'s async
    /// twins do), never on the cooperative pool. A task cancelled before the update starts gets
    /// `CancellationError` and commits nothing.
    public func set(_ newValue: Value) async throws {
        let access = self.access
        try await access.store.runBlocking { try access.modify { $0 = newValue } }
    }

    /// ``update(_:)`` for async code (see ``set(_:)-async``).
    @discardableResult
    public func update<T: Sendable>(_ body: @Sendable (inout Value) throws -> T) async throws -> T {
        let lens = self
        // The call waits for the thread, so `body` does not outlive it.
        return try await withoutActuallyEscaping(body) { body in
            try await lens.access.store.runBlocking { try lens.update(body) }
        }
    }
}
