import Foundation

/// One synced object: a body and named attachments in a container, as the client or server holds it.
///
/// Bodies and attachments are stored as blobs keyed by their SHA-256, so identical bytes under any
/// object are stored once and cross the network once.
public struct SyncObject: Hashable, Sendable {
    /// The group the object belongs to (the original's NTIID): non-empty UTF-8 without NUL.
    public var container: String
    /// The object's identifier within its container: non-empty UTF-8 without NUL.
    public var id: String
    /// The object's content; empty for a tombstone.
    public var body: Data
    /// Named blobs (images, files); empty for a tombstone.
    public var attachments: [String: Data]
    /// Whether this is a tombstone: the object was deleted.
    public internal(set) var isDeleted: Bool
    /// The server's sequence number of this version; nil when the version has never been synced.
    public internal(set) var revision: UInt64?

    /// A new live version of an object; it has no revision until the server has accepted it.
    public init(container: String, id: String, body: Data, attachments: [String: Data] = [:]) {
        self.container = container
        self.id = id
        self.body = body
        self.attachments = attachments
        self.isDeleted = false
        self.revision = nil
    }

    init(container: String, id: String, body: Data, attachments: [String: Data], isDeleted: Bool, revision: UInt64?) {
        self.init(container: container, id: id, body: body, attachments: attachments)
        self.isDeleted = isDeleted
        self.revision = revision
    }

    /// A tombstone for `container`/`id`.
    static func tombstone(container: String, id: String, revision: UInt64?) -> SyncObject {
        SyncObject(container: container, id: id, body: Data(), attachments: [:], isDeleted: true, revision: revision)
    }
}
