import Foundation

/// Where a cluster store keeps its state: records, references and counts in PostgreSQL, blob bytes
/// in an S3-compatible object store. Every instance that opens the same database and bucket shares
/// one store.
///
/// Credentials never appear in logs or errors: ``description`` redacts the secret access key and
/// the database password.
public struct ClusterConfiguration: Sendable {
    /// `postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require]`.
    public var databaseURL: String
    /// `http(s)://host:port` of the S3-compatible service (path-style requests).
    public var objectStoreEndpoint: URL
    /// The bucket holding the store's objects; created on first open when missing.
    public var bucket: String
    /// The region requests are signed for. Default `"us-east-1"`.
    public var region: String
    /// The access key ID requests are signed with. Default: `$AWS_ACCESS_KEY_ID`.
    public var accessKeyID: String
    /// The secret the requests are signed with. Default: `$AWS_SECRET_ACCESS_KEY`. Never logged.
    public var secretAccessKey: String
    /// An optional directory caching verified blobs on this machine; re-verified on load.
    public var cacheDirectory: URL?
    /// The most PostgreSQL connections this instance holds open. Default 8.
    public var maximumDatabaseConnections: Int
    /// How long one request to either service may take before it counts as `unavailable`: a
    /// PostgreSQL statement (or the wait for a pooled connection), or one object-store request.
    /// Past it the call throws `unavailable` naming the endpoint, and the next call tries again.
    /// Default 30 seconds.
    public var requestTimeout: Duration
    /// How long a commit whose outcome was lost (the connection failed after COMMIT was sent) is
    /// resolved against an unreachable PostgreSQL before `write` gives up with `unavailable`
    /// saying the outcome is unknown (it was applied at most once). Default 5 minutes.
    public var commitResolutionTimeout: Duration
    /// How long a snapshot's lease (its pin on collection, in every instance) lives past its last
    /// renewal; the instance renews its leases every quarter of it. A snapshot whose lease could
    /// not be renewed in time fails its blob reads with `unavailable`. Default 2 minutes.
    public var leaseDuration: Duration
    /// The size a pack object is filled to before it is uploaded: a streaming put uploads its
    /// chunks in packs of this size (its memory holds about one), and the collector moves inline
    /// blobs into a pack once this many bytes of them have accumulated. Default 8 MiB.
    public var packSizeTarget: Int

    /// A configuration with the defaults above; credentials come from the environment.
    public init(databaseURL: String, objectStoreEndpoint: URL, bucket: String) {
        let environment = ProcessInfo.processInfo.environment
        self.databaseURL = databaseURL
        self.objectStoreEndpoint = objectStoreEndpoint
        self.bucket = bucket
        self.region = "us-east-1"
        self.accessKeyID = environment["AWS_ACCESS_KEY_ID"] ?? ""
        self.secretAccessKey = environment["AWS_SECRET_ACCESS_KEY"] ?? ""
        self.cacheDirectory = nil
        self.maximumDatabaseConnections = 8
        self.requestTimeout = .seconds(30)
        self.commitResolutionTimeout = .seconds(300)
        self.leaseDuration = .seconds(120)
        self.packSizeTarget = 8 << 20
    }
}

extension ClusterConfiguration: CustomStringConvertible, CustomDebugStringConvertible {
    /// The configuration with the secret access key and the database password redacted.
    public var description: String {
        let database = (try? DatabaseURL(parsing: databaseURL).redacted) ?? "<unparsable database URL>"
        return "ClusterConfiguration(database: \(database), objectStore: \(ObjectStoreEndpoint.display(objectStoreEndpoint)), "
            + "bucket: \(bucket), region: \(region), accessKeyID: \(accessKeyID), secretAccessKey: <redacted>)"
    }

    /// The same as ``description``: secrets stay redacted in debugger output too.
    public var debugDescription: String { description }
}
