import Foundation

/// The errors StateLens adds to the store's own (`StoreError`, which `LensStore` and lens methods
/// also throw for I/O, a closed store, damage, ...).
public enum LensError: Error {
    /// A write below an optional part that is nil, through a lens without a default
    /// (``MutableLens/defaulting(to:)``): nothing was changed. `path` names the nil part, as
    /// `root.settings.protection`.
    case missingParent(path: String)
    /// The stored state decodes neither as the root type nor through
    /// ``LensStore/Configuration/migrate`` (which threw, or is nil): the underlying error is the
    /// decoder's or migration's. Nothing stored was changed.
    case undecodable(any Error)
    /// A state name that is empty, longer than 256 UTF-8 bytes or contains NUL; the message says which.
    case invalidName(String)
}

extension LensError: CustomStringConvertible {
    /// A message naming the cause.
    public var description: String {
        switch self {
        case let .missingParent(path): "cannot write below \(path): it is nil and the lens has no default"
        case let .undecodable(error): "the stored state cannot be decoded: \(error)"
        case let .invalidName(message): "invalid state name: \(message)"
        }
    }
}
