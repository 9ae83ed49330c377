import ContentStore
import Foundation

// The JSON bodies of the HTTP API (Docs/sync.md "HTTP API"). Digests are lowercase hex.

/// An object version on the wire: its blobs by digest, never their bytes.
struct WireObject: Codable, Hashable, Sendable {
    var container: String
    var id: String
    var revision: UInt64?
    var deleted: Bool
    var body: String?
    var attachments: [String: String]

    init(_ object: StoredObject) {
        container = object.container
        id = object.id
        revision = object.revision
        deleted = object.isDeleted
        body = object.body?.hex
        attachments = object.attachments.mapValues(\.hex)
    }

    /// The stored form; throws when a digest is not 64 hex digits or a name is invalid.
    func stored(author: String = "") throws -> StoredObject {
        try Names.check(container: container, id: id)
        guard !deleted else {
            return .tombstone(container: container, id: id, revision: revision, author: author)
        }
        guard let body, let bodyDigest = Digest(hex: body) else {
            throw SyncError(code: .protocolViolation, message: "object \(container)/\(id) has no valid body digest")
        }
        var digests: [String: Digest] = [:]
        for (name, hex) in attachments {
            try Names.check(name, "attachment name")
            guard let digest = Digest(hex: hex) else {
                throw SyncError(code: .protocolViolation, message: "attachment \(name) of \(container)/\(id) has no valid digest")
            }
            digests[name] = digest
        }
        return StoredObject(container: container, id: id, revision: revision, isDeleted: false, author: author,
                            body: bodyDigest, attachments: digests)
    }
}

/// `POST /v1/blobs/missing`: which of these digests the server lacks.
struct DigestList: Codable, Hashable, Sendable {
    var digests: [String]
}

/// `POST /v1/push`.
struct PushRequest: Codable, Hashable, Sendable {
    struct Mutation: Codable, Hashable, Sendable {
        /// The client's mutation ID: increasing per client, never reused.
        var mutation: UInt64
        /// The server revision the local edit started from; 0 for none.
        var base: UInt64
        var object: WireObject
    }
    var client: String
    /// Every mutation up to this one has had its answer: the server may forget their outcomes.
    var acknowledged: UInt64
    var mutations: [Mutation]
}

/// The answer to `POST /v1/push`: one result per mutation, in order.
struct PushResponse: Codable, Hashable, Sendable {
    struct Result: Codable, Hashable, Sendable {
        var mutation: UInt64
        /// 200 applied, 409 overruled (the server's version won), other 4xx rejected.
        var status: Int
        /// For 200: the revision the change got.
        var revision: UInt64?
        var message: String?
        /// For 409 and rejections: what the server holds now (absent when nothing).
        var server: WireObject?
    }
    var results: [Result]
    /// The server's sequence after the push.
    var sequence: UInt64
}

/// The 409 answer to a push that names blobs the server does not hold.
struct MissingBlobs: Codable, Hashable, Sendable, Error {
    var missing: [String]
}

/// The answer to `GET /v1/pull`.
struct PullResponse: Codable, Hashable, Sendable {
    /// The current version of every object changed after `since`, in revision order; tombstones included.
    var changes: [WireObject]
    /// Where the next pull starts: the last revision returned when `more`, else the server's sequence.
    var sequence: UInt64
    /// More changes wait: pull again from `sequence`.
    var more: Bool
    /// `since` is behind the tombstones the server has dropped: pull from 0 and drop what is not there.
    var resync: Bool
}

/// An error body: `{"error": "..."}`.
struct WireError: Codable, Hashable, Sendable {
    var error: String
}

enum Wire {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func encode(_ value: some Encodable) throws -> Data { try encoder.encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T { try JSONDecoder().decode(type, from: data) }
}

/// The body of `POST /v1/blobs` and of the answer to `POST /v1/blobs/fetch`: one frame per blob,
/// `[64 lowercase hex digits: the digest][u64 little-endian: length][length bytes]`. In an answer a
/// length of 2^64 - 1, with no bytes, means the server does not hold the blob.
enum BlobFrames {
    struct Frame: Sendable {
        var digest: Digest
        /// nil: the sender does not hold it.
        var data: Data?
    }

    static let absent = UInt64.max
    private static let digestLength = 64

    static func append(_ digest: Digest, _ data: Data?, to buffer: inout Data) {
        var header = ByteWriter(capacity: digestLength + 8)
        header.append(contentsOf: digest.hex.utf8)
        header.append(data.map { UInt64($0.count) } ?? absent)
        buffer.append(contentsOf: header.bytes)
        if let data { buffer.append(data) }
    }

    /// The frames of `data`; throws a message naming the offset when the framing is broken.
    static func parse(_ data: Data) throws(FramingError) -> [Frame] {
        let parsed = data.withUnsafeBytes { raw -> Result<[Frame], FramingError> in
            var reader = ByteReader(raw)
            var frames: [Frame] = []
            while !reader.isAtEnd {
                switch frame(&reader) {
                case .success(let frame): frames.append(frame)
                case .failure(let error): return .failure(error)
                }
            }
            return .success(frames)
        }
        return try parsed.get()
    }

    /// The frame at the reader's position.
    private static func frame(_ reader: inout ByteReader) -> Result<Frame, FramingError> {
        let start = reader.position
        guard let hex = try? reader.readBytes(digestLength), let length = try? reader.read(UInt64.self) else {
            return .failure(FramingError(offset: start, "a frame header is cut short"))
        }
        guard let digest = Digest(hex: String(decoding: hex, as: UTF8.self)) else {
            return .failure(FramingError(offset: start, "a frame does not start with a SHA-256 digest in hex"))
        }
        guard length != absent else { return .success(Frame(digest: digest, data: nil)) }
        guard length <= UInt64(reader.remaining), let bytes = try? reader.readBytes(Int(length)) else {
            return .failure(FramingError(offset: reader.position, "blob \(digest) claims \(length) bytes; \(reader.remaining) follow"))
        }
        return .success(Frame(digest: digest, data: Data(bytes)))
    }

    struct FramingError: Error, Sendable, CustomStringConvertible {
        var offset: Int
        var message: String
        init(offset: Int, _ message: String) {
            self.offset = offset
            self.message = message
        }
        var description: String { "blob frames at byte \(offset): \(message)" }
    }
}

/// The answer to `POST /v1/blobs`: one result per frame, in order.
struct BlobResults: Codable, Hashable, Sendable {
    struct Result: Codable, Hashable, Sendable {
        var digest: String
        /// 201 stored, 200 already held, 400 the bytes do not hash to the digest, 413 over the limit.
        var status: Int
        var error: String?
    }
    var results: [Result]
}
