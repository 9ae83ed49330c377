/// A failure of a sync operation: a code to switch on, a message naming the cause (container, id,
/// endpoint, status; never a token), and the underlying error.
public struct SyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure; compare with the static members (`error.code == .unavailable`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case invalidArgument, unavailable, unauthorized, protocolViolation, conflictNotFound, notRunning
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A container, id or attachment name is empty, has NUL or is too long.
        public static let invalidArgument = Code(.invalidArgument)
        /// The server could not be reached or failed (5xx, timeout) after the retries: pending work is kept.
        public static let unavailable = Code(.unavailable)
        /// The server refused the bearer token (401/403): pending work is kept.
        public static let unauthorized = Code(.unauthorized)
        /// The server's answer is not what the protocol says (bad JSON, a blob whose bytes do not match).
        public static let protocolViolation = Code(.protocolViolation)
        /// ``SyncClient/resolve(_:keepingLocal:)`` was given a conflict the client no longer holds.
        public static let conflictNotFound = Code(.conflictNotFound)
        /// ``SyncServer/port`` was asked for, but ``SyncServer/run()`` was not called within
        /// `SyncServerConfiguration.startTimeout`.
        public static let notRunning = Code(.notRunning)

        /// The code's name.
        public var description: String { value.rawValue }
    }

    /// What kind of failure.
    public var code: Code
    /// What failed, naming the object or endpoint.
    public var message: String
    /// The error that caused this one, if any.
    public var underlying: (any Error & Sendable)?

    /// A failure with a code, a message and an optional cause.
    public init(code: Code, message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// `code: message (underlying)`.
    public var description: String {
        "\(code): \(message)" + (underlying.map { " (\($0))" } ?? "")
    }

    /// Errors are equal when their codes are.
    public static func == (lhs: SyncError, rhs: SyncError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
