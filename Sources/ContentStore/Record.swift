import Foundation

/// A small mutable entry: a value plus references to blobs.
///
/// Each occurrence of a digest in ``references`` adds one to that blob's reference count while
/// the record exists; the store maintains the counts from the references themselves.
///
/// The store holds every record in memory, so a record is laid out for size: a record with one
/// reference (the most common shape: a key naming a blob) keeps the digest inline instead of in an
/// array of its own, which would cost an allocation of 80 bytes beside the record; and the value
/// sits inside the enum that tells the shapes apart, whose tag then takes spare bits of the value's
/// own tag byte: 48 bytes a record instead of the 56 of a value beside a 33-byte enum (8 bytes of
/// each of a million records' slots in the record tree's leaves).
public struct Record: Hashable, Sendable {
    private var storage: Storage

    /// The record's payload: small metadata, up to ``Store/Limits/maximumValueLength`` bytes.
    public var value: Data {
        get { storage.value }
        set { storage.value = newValue }
        _modify {
            var value = storage.takeValue()
            defer { storage.value = value }
            yield &value
        }
    }

    /// Blobs this record keeps alive. May repeat: each occurrence counts once.
    public var references: [Digest] {
        get { storage.references }
        set { storage = Storage(value: storage.takeValue(), references: newValue) }
        _modify {
            var array = storage.references
            // The array then holds the only reference to its buffer: appending in place, not copying.
            storage = .none(storage.takeValue())
            defer { storage = Storage(value: storage.takeValue(), references: array) }
            yield &array
        }
    }

    /// Creates a record.
    public init(value: Data = Data(), references: [Digest] = []) {
        storage = Storage(value: value, references: references)
    }

    /// A record with a single reference, without the array ``init(value:references:)`` takes.
    package init(value: Data, onlyReference digest: Digest) {
        storage = .one(value, digest)
    }

    /// The reference of a record that has exactly one, else nil: read without the array
    /// ``references`` makes.
    package var onlyReference: Digest? {
        guard case .one(_, let digest) = storage else { return nil }
        return digest
    }

    /// One canonical form per list of references, so the synthesized equality compares the lists.
    private enum Storage: Hashable, Sendable {
        case none(Data)
        case one(Data, Digest)
        /// Two or more.
        case many(Data, [Digest])

        init(value: Data, references digests: [Digest]) {
            switch digests.count {
            case 0: self = .none(value)
            case 1: self = .one(value, digests[0])
            default: self = .many(value, digests)
            }
        }

        var value: Data {
            get {
                switch self {
                case .none(let value), .one(let value, _), .many(let value, _): value
                }
            }
            set {
                switch self {
                case .none: self = .none(newValue)
                case .one(_, let digest): self = .one(newValue, digest)
                case .many(_, let digests): self = .many(newValue, digests)
                }
            }
        }

        /// The value, leaving an empty one in its place: the caller then holds the only reference to
        /// its buffer and can change it in place.
        mutating func takeValue() -> Data {
            let value = self.value
            self.value = Data()
            return value
        }

        var references: [Digest] {
            switch self {
            case .none: []
            case .one(_, let digest): [digest]
            case .many(_, let digests): digests
            }
        }
    }
}
