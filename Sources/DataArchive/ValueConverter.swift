import Foundation

/// Converts between a value and the bytes DataArchive stores, for the `ValueConverter` variants
/// of `set`, `archiveCurrent`, `get`, `getAll` and the lazy reader's `getNext`.
///
/// Conversions run off the caller's thread: `toData` on the key's operation lane (before the
/// write it feeds), `from(data:)` just before the completion handler is called.
public protocol ValueConverter {
    /// The type of the value this converter wraps.
    associatedtype T
    /// Decodes stored bytes; nil when they do not decode (the result is then `couldNotConvertFile`).
    static func from(data: Data) -> Self?
    /// Encodes the value; nil when it cannot be encoded (the write fails with
    /// `couldNotConvertFile` and changes nothing).
    var toData: Data? { get }
    /// The wrapped value.
    var value: T { get }
}

/// A ``ValueConverter`` for `Codable` values, stored as JSON.
public struct JSONValueConverter<T: Codable>: ValueConverter {
    /// Decodes `data` as JSON; nil when it is not a valid encoding of `T`.
    public static func from(data: Data) -> JSONValueConverter<T>? {
        guard let value = try? JSONDecoder().decode(T.self, from: data) else { return nil }
        return JSONValueConverter(value: value)
    }

    /// The value encoded as JSON; nil when encoding fails.
    public var toData: Data? {
        try? JSONEncoder().encode(value)
    }

    /// The wrapped value.
    public var value: T

    /// Wraps `value`.
    public init(value: T) {
        self.value = value
    }
}

extension JSONValueConverter: Sendable where T: Sendable {}

/// The converter behind the `Data` variants: the bytes are the value.
struct DataValueConverter: ValueConverter {
    static func from(data: Data) -> DataValueConverter? { DataValueConverter(value: data) }
    var toData: Data? { value }
    let value: Data
}
