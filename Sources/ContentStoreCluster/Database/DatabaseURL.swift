import ContentStore
import Foundation

/// A parsed `postgres://user[:password]@host[:port]/database[?sslmode=...]`.
///
/// The password is kept for the connection only: ``redacted`` and every error this type throws
/// leave it out.
struct DatabaseURL: Sendable, Equatable {
    enum TLSMode: String, Sendable {
        case disable, prefer, require
    }

    var user: String
    var password: String?
    var host: String
    var port: Int
    var database: String
    var tlsMode: TLSMode

    static let defaultPort = 5432

    /// `postgres://user@host:port/database`: what messages and logs show.
    var redacted: String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// `host:port/database`: how errors name the service.
    var endpoint: String { "\(host):\(port)/\(database)" }
}

extension DatabaseURL {
    init(parsing text: String) throws {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw Self.invalid("is not a postgres://user[:password]@host[:port]/database URL")
        }
        guard let user = components.user, !user.isEmpty else { throw Self.invalid("names no user") }
        guard let host = components.host, !host.isEmpty else { throw Self.invalid("names no host") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw Self.invalid("names no database (…/DATABASE)") }
        var tlsMode = TLSMode.prefer
        for item in components.queryItems ?? [] {
            switch (item.name, item.value ?? "") {
            case ("sslmode", "disable"): tlsMode = .disable
            case ("sslmode", "allow"), ("sslmode", "prefer"): tlsMode = .prefer
            case ("sslmode", "require"), ("sslmode", "verify-ca"), ("sslmode", "verify-full"): tlsMode = .require
            case ("sslmode", let other): throw Self.invalid("has an unknown sslmode \"\(other)\"")
            case (let name, _): throw Self.invalid("has an unsupported parameter \"\(name)\"")
            }
        }
        self.user = components.user!.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        self.host = host
        self.port = components.port ?? Self.defaultPort
        self.database = database.removingPercentEncoding ?? database
        self.tlsMode = tlsMode
    }

    /// The message never quotes the URL: it may hold a password.
    private static func invalid(_ problem: String) -> StoreError {
        StoreError(code: .invalidArgument, message: "the database URL \(problem)")
    }
}
