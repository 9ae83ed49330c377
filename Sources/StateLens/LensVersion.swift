import Foundation

/// A committed version of a state, as ``LensStore/versions()`` lists it: the current one and the
/// kept older ones (``LensStore/Configuration/keptVersions``).
public struct LensVersion: Hashable, Sendable {
    /// The version's commit number for this state: 1 for the first update, one more for each
    /// update, restore and reset after it.
    public var sequence: UInt64
    /// When the version was committed (the store's clock, `Store.Configuration.now`).
    public var date: Date

    /// A version with this sequence and date (``LensStore/restore(_:)`` looks versions up by sequence).
    public init(sequence: UInt64, date: Date) {
        self.sequence = sequence
        self.date = date
    }
}

/// One committed change of the value a lens reads (``MutableLens/changes()``).
public struct LensChange<Value: Sendable>: Sendable {
    /// The value before the commit.
    public var old: Value
    /// The value the commit made.
    public var new: Value
    /// The commit's sequence (``LensVersion/sequence``).
    public var sequence: UInt64

    /// A change from `old` to `new` at `sequence`.
    public init(old: Value, new: Value, sequence: UInt64) {
        self.old = old
        self.new = new
        self.sequence = sequence
    }
}

extension LensChange: Equatable where Value: Equatable {}
extension LensChange: Hashable where Value: Hashable {}
