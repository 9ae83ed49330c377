import Foundation

/// A small mutable entry: a value plus references to blobs.
///
/// Each occurrence of a digest in ``references`` adds one to that blob's reference count while
/// the record exists; the store maintains the counts from the references themselves.
public struct Record: Hashable, Sendable {
    /// The record's payload: small metadata, up to ``Store/Limits/maximumValueLength`` bytes.
    public var value: Data
    /// Blobs this record keeps alive. May repeat: each occurrence counts once.
    public var references: [Digest]

    /// Creates a record.
    public init(value: Data = Data(), references: [Digest] = []) {
        self.value = value
        self.references = references
    }
}
