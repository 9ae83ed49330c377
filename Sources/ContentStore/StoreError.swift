/// An error raised by a ``Store``: a stable ``Code``, a message that names the cause
/// (file, offset, key or digest), and the underlying error when there is one.
///
/// Equality and hashing compare ``code`` only, so `error.code == .notFound` and
/// `#expect(throws: StoreError(code: .notFound))`-style checks read naturally.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is. A struct wrapping a private enum, so that codes can be
    /// added without breaking exhaustive `switch`es in client code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: String, Hashable, Sendable {
            case notFound, corrupted, missingBlob, invalidArgument, limitExceeded
            case locked, closed, unsupportedFormat, io, unavailable
        }
        private var wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// A blob, record or file that was asked for does not exist.
        public static var notFound: Code { Code(.notFound) }
        /// Stored bytes failed a checksum or digest check, or a structure did not parse.
        public static var corrupted: Code { Code(.corrupted) }
        /// A record references a digest the store does not hold.
        public static var missingBlob: Code { Code(.missingBlob) }
        /// An argument is malformed: an empty key, a key with NUL, a negative limit, ...
        public static var invalidArgument: Code { Code(.invalidArgument) }
        /// An argument or stored object exceeds a configured limit.
        public static var limitExceeded: Code { Code(.limitExceeded) }
        /// Another process holds the store open.
        public static var locked: Code { Code(.locked) }
        /// The store was closed, or failed and must be reopened.
        public static var closed: Code { Code(.closed) }
        /// The directory is not a store, or was written by a newer format version.
        public static var unsupportedFormat: Code { Code(.unsupportedFormat) }
        /// The operating system reported an I/O error.
        public static var io: Code { Code(.io) }
        /// A service the store depends on (a cluster's PostgreSQL or object store) cannot be
        /// reached or answered with a server error. The message names the endpoint, never a
        /// credential; the same call may succeed once the service is back, without reopening.
        public static var unavailable: Code { Code(.unavailable) }

        /// The code's name, such as `notFound`.
        public var description: String { wrapped.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation naming the file, offset, key or digest involved.
    public var message: String
    /// The file the failure concerns, when there is one.
    public var path: String?
    /// The byte offset within ``path`` the failure concerns, when there is one.
    public var offset: UInt64?
    /// The underlying error, such as a ``SystemError`` from a failed system call.
    public var cause: (any Error)?

    /// Creates an error.
    public init(code: Code, message: String, path: String? = nil, offset: UInt64? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.cause = cause
    }

    /// `code: message (cause)`.
    public var description: String {
        var text = "\(code): \(message)"
        if let cause { text += " (\(cause))" }
        return text
    }

    public static func == (lhs: StoreError, rhs: StoreError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

extension StoreError {
    static func io(_ message: String, path: String, cause: any Error) -> StoreError {
        StoreError(code: .io, message: "\(message): \(path)", path: path, cause: cause)
    }

    static func corrupted(_ message: String, path: String, offset: UInt64? = nil) -> StoreError {
        let location = offset.map { " at offset \($0)" } ?? ""
        return StoreError(code: .corrupted, message: "\(message) in \(path)\(location)", path: path, offset: offset)
    }

    static func invalidArgument(_ message: String) -> StoreError {
        StoreError(code: .invalidArgument, message: message)
    }

    static func limitExceeded(_ message: String) -> StoreError {
        StoreError(code: .limitExceeded, message: message)
    }
}
