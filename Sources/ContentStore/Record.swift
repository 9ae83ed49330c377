import Foundation

/// A small mutable entry: a value plus references to blobs.
///
/// Each occurrence of a digest in ``references`` adds one to that blob's reference count while
/// the record exists; the store maintains the counts from the references themselves.
///
/// The store holds every record in memory, so a record is laid out for size: a record with one
/// reference (the most common shape: a key naming a blob) keeps the digest inline instead of in an
/// array of its own, which would cost an allocation of 80 bytes beside the record's 56.
public struct Record: Hashable, Sendable {
    /// The record's payload: small metadata, up to ``Store/Limits/maximumValueLength`` bytes.
    public var value: Data
    private var storage: References

    /// Blobs this record keeps alive. May repeat: each occurrence counts once.
    public var references: [Digest] {
        get { storage.array }
        set { storage = References(newValue) }
        _modify {
            var array = storage.array
            // The array then holds the only reference to its buffer: appending in place, not copying.
            storage = .none
            defer { storage = References(array) }
            yield &array
        }
    }

    /// Creates a record.
    public init(value: Data = Data(), references: [Digest] = []) {
        self.value = value
        storage = References(references)
    }

    /// A record with a single reference, without the array ``init(value:references:)`` takes.
    init(value: Data, onlyReference digest: Digest) {
        self.value = value
        storage = .one(digest)
    }

    /// One canonical form per list of references, so the synthesized equality compares the lists.
    private enum References: Hashable, Sendable {
        case none
        case one(Digest)
        /// Two or more.
        case many([Digest])

        init(_ digests: [Digest]) {
            switch digests.count {
            case 0: self = .none
            case 1: self = .one(digests[0])
            default: self = .many(digests)
            }
        }

        var array: [Digest] {
            switch self {
            case .none: []
            case .one(let digest): [digest]
            case .many(let digests): digests
            }
        }
    }
}
