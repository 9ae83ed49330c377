import Foundation

/// The object store as the cluster engine sees it: a flat namespace of immutable objects in one
/// bucket. A narrow seam (like the engine's `FileIO`), so tests can inject faults between the
/// engine and a real service; ``S3Client`` is the conformer that talks to one.
///
/// Every method throws `StoreError`: `unavailable` when the service cannot be reached or answers
/// with a server error (naming the endpoint, never a credential), `notFound` for a missing
/// object or bucket, `invalidArgument` for refused credentials or a bad range, `io` otherwise.
package protocol ObjectStore: Sendable {
    /// Creates the bucket unless it exists already.
    func createBucketIfMissing() async throws
    /// Stores `bytes` under `key`. With `ifAbsent`, an existing object is left untouched and the
    /// result is `.alreadyExists` (atomically where the service supports conditional puts).
    func put(_ key: String, bytes: [UInt8], ifAbsent: Bool) async throws -> PutOutcome
    /// The object's bytes, or the bytes in `range` (clamped to the object's end as S3 does).
    func get(_ key: String, range: Range<UInt64>?) async throws -> [UInt8]
    /// The object's size and entity tag, or nil when there is no such object.
    func head(_ key: String) async throws -> ObjectInfo?
    /// Removes the object; removing a missing object succeeds.
    func delete(_ key: String) async throws
    /// One page of the keys starting with `prefix`. AWS lists in UTF-8 byte order; some services
    /// (SeaweedFS) walk `/`-separated directories instead, so callers must not rely on the order.
    func list(prefix: String, continuation: String?, maxKeys: Int) async throws -> ObjectListing
    /// Releases connections. Idempotent.
    func shutdown() async throws
}

/// What a put did.
package enum PutOutcome: Hashable, Sendable {
    case created
    /// `ifAbsent` was asked and an object already had that key; nothing was written.
    case alreadyExists
}

/// An object's metadata.
package struct ObjectInfo: Hashable, Sendable {
    package var key: String
    package var size: UInt64
    package var etag: String
    package var lastModified: Date?
}

/// One page of a listing; pass ``continuation`` back for the next.
package struct ObjectListing: Hashable, Sendable {
    package var objects: [ObjectInfo]
    /// Nil when this is the last page.
    package var continuation: String?
}

extension ObjectStore {
    /// Every key under `prefix`, following continuations.
    package func listAll(prefix: String, pageSize: Int = 1000) async throws -> [ObjectInfo] {
        var objects: [ObjectInfo] = []
        var continuation: String?
        repeat {
            let page = try await list(prefix: prefix, continuation: continuation, maxKeys: pageSize)
            objects += page.objects
            continuation = page.continuation
        } while continuation != nil
        return objects
    }
}

/// How an endpoint appears in messages: scheme, host and port only, never user information.
enum ObjectStoreEndpoint {
    static func display(_ url: URL) -> String {
        var components = URLComponents()
        components.scheme = url.scheme
        components.host = url.host
        components.port = url.port
        return components.string ?? "<endpoint>"
    }
}
