import Foundation

/// The outcome of a ``DataArchive`` operation, passed to its completion handler.
///
/// The cases are the original library's (with `couldNotDeleteFile` spelled correctly) plus
/// ``storeFailure(_:)``. URLs name `<root>/data_archive/<key>/<n>.dat` (`0` = current value,
/// `1` = oldest archive … `n` = newest) the way the original laid out its files; they are for
/// messages only, no such files exist. Which case each operation reports is listed in
/// Docs/dataarchive.md.
public enum DataArchiveResult: Sendable {
    /// The operation succeeded.
    case success
    /// The key has no value (`getAll`, and the `ValueConverter` variant of `get`). The URL names the
    /// current value's file.
    case fileNotFound(URL)
    /// A `ValueConverter` could not convert: `from(data:)` returned nil for the version at the URL,
    /// or `toData` returned nil for the value to be written there. The string names the converter type.
    case couldNotConvertFile(URL, String)
    /// Kept for source compatibility with the original library; not reported by this implementation.
    case couldNotMoveFile(URL, URL, any Error)
    /// Kept for source compatibility with the original library; not reported by this implementation.
    case couldNotDeleteFile(URL, any Error)
    /// Kept for source compatibility with the original library; not reported by this implementation
    /// (a failed write is ``storeFailure(_:)``).
    case couldNotWriteToFile(URL, any Error)
    /// `keep(upTo:archivesForKey:)` was given a limit below 1; nothing changed.
    case limitNeedsToBePositiveNumber
    /// The lazy reader has yielded every version, or was finished.
    case lockingReaderWasFinished
    /// Kept for source compatibility with the original library; not reported by this implementation.
    case couldNotDeleteKey(URL, any Error)
    /// Kept for source compatibility with the original library; not reported by this
    /// implementation (an `archiveCurrent` either archives and sets, or changes nothing).
    case couldNotArchiveButCouldSet
    /// The store failed, or refused the request: the error is a `StoreError` naming the cause —
    /// an empty key (`invalidArgument`), a key over ``DataArchive/maximumKeyLength`` (`limitExceeded`),
    /// a store that could not be opened (`locked`, `io`, `unsupportedFormat`, …), a damaged blob
    /// (`corrupted`), and so on. Nothing was changed.
    case storeFailure(any Error)

    /// Whether this is ``success``.
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

extension DataArchiveResult: CustomStringConvertible {
    /// The case and its payload, for logs.
    public var description: String {
        switch self {
        case .success: "success"
        case .fileNotFound(let url): "fileNotFound(\(url.path))"
        case .couldNotConvertFile(let url, let type): "couldNotConvertFile(\(url.path), \(type))"
        case .couldNotMoveFile(let from, let to, let error): "couldNotMoveFile(\(from.path), \(to.path), \(error))"
        case .couldNotDeleteFile(let url, let error): "couldNotDeleteFile(\(url.path), \(error))"
        case .couldNotWriteToFile(let url, let error): "couldNotWriteToFile(\(url.path), \(error))"
        case .limitNeedsToBePositiveNumber: "limitNeedsToBePositiveNumber"
        case .lockingReaderWasFinished: "lockingReaderWasFinished"
        case .couldNotDeleteKey(let url, let error): "couldNotDeleteKey(\(url.path), \(error))"
        case .couldNotArchiveButCouldSet: "couldNotArchiveButCouldSet"
        case .storeFailure(let error): "storeFailure(\(error))"
        }
    }
}

/// A completion handler of a DataArchive operation that returns no value.
public typealias DataArchiveCompletionHandler = @Sendable (DataArchiveResult) -> Void
