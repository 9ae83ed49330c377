import Crypto
import Foundation

/// AWS Signature Version 4 (`AWS4-HMAC-SHA256`), written once for every request the cluster sends
/// to an object store.
///
/// Owns one invariant: the canonical request is built exactly as AWS specifies, so the server's
/// recomputation matches byte for byte:
/// ```
/// Method \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n \n SignedHeaders \n PayloadHash
/// ```
/// - URI: each path segment percent-encoded except the RFC 3986 unreserved set (`A-Za-z0-9-._~`),
///   `/` kept. Services other than S3 also remove `.`/`..` segments and collapse repeated slashes
///   (``normalizesPath``); S3 signs the key as written, since `a//b` and `a/b` are different keys.
/// - Query: names and values encoded the same way, sorted by encoded name, then value.
/// - Headers: lowercased names, sorted; values trimmed, inner runs of spaces collapsed to one;
///   repeated names joined with `,` in request order.
///
/// Tested against AWS's published SigV4 test suite (known answers) and a real S3 server that
/// checks signatures. The secret is only ever an HMAC key: it is in no string this type returns.
package struct SigV4Signer: Sendable {
    package var accessKeyID: String
    private var secretAccessKey: String
    package var region: String
    package var service: String
    /// Whether the canonical URI drops dot segments and repeated slashes (every service but S3).
    package var normalizesPath: Bool

    package init(accessKeyID: String, secretAccessKey: String, region: String, service: String, normalizesPath: Bool) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.region = region
        self.service = service
        self.normalizesPath = normalizesPath
    }

    /// A request to sign. `path` and the query items are unencoded; the signer encodes them.
    package struct Request: Sendable {
        package var method: String
        package var path: String
        package var query: [(name: String, value: String)]
        package var headers: [(name: String, value: String)]
        /// Lowercase hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
        package var payloadHash: String

        package init(method: String, path: String, query: [(name: String, value: String)] = [],
                     headers: [(name: String, value: String)], payloadHash: String) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// The intermediate strings (for tests and diagnostics) and the header to send.
    package struct Signature: Sendable {
        package var canonicalRequest: String
        package var stringToSign: String
        package var authorization: String
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC: the `X-Amz-Date` header's value for `date`.
    package static func timestamp(_ date: Date) -> String {
        let c = utcCalendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func digits(_ value: Int?, _ width: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return digits(c.year, 4) + digits(c.month, 2) + digits(c.day, 2) + "T"
            + digits(c.hour, 2) + digits(c.minute, 2) + digits(c.second, 2) + "Z"
    }

    /// Signs `request` as of `date`. The request must carry `Host` and an `X-Amz-Date` equal to
    /// ``timestamp(_:)`` of `date` (the caller adds both, as it sends them).
    package func sign(_ request: Request, at date: Date) -> Signature {
        let timestamp = Self.timestamp(date)
        let day = String(timestamp.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders(request.headers)
        let canonicalRequest = [
            request.method,
            canonicalURI(request.path),
            Self.canonicalQuery(request.query),
            canonicalHeaders,
            signedHeaders,
            request.payloadHash,
        ].joined(separator: "\n")
        let stringToSign = [
            "AWS4-HMAC-SHA256", timestamp, scope, Self.hexSHA256(Array(canonicalRequest.utf8)),
        ].joined(separator: "\n")
        let signature = Self.hex(hmac(key: signingKey(day: day), stringToSign))
        let authorization = "AWS4-HMAC-SHA256 Credential=\(accessKeyID)/\(scope), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signature(canonicalRequest: canonicalRequest, stringToSign: stringToSign, authorization: authorization)
    }

    /// Lowercase hex SHA-256, the form `x-amz-content-sha256` and the string to sign use.
    package static func hexSHA256(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        // A pack body is megabytes: hash it where it lies rather than copy it first.
        if bytes.withContiguousStorageIfAvailable({ hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }) == nil {
            hasher.update(data: Array(bytes))
        }
        return hex(Array(hasher.finalize()))
    }

    /// SHA-256 of no bytes: the payload hash of every request without a body.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    // MARK: - Canonical forms

    private func canonicalURI(_ path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard normalizesPath else {
            return segments.map { Self.percentEncode($0) }.joined(separator: "/")
        }
        var kept: [String] = []
        for segment in segments where !segment.isEmpty && segment != "." {
            if segment == ".." { _ = kept.popLast() } else { kept.append(segment) }
        }
        guard !kept.isEmpty else { return "/" }
        let trailing = path.hasSuffix("/") ? "/" : ""
        return "/" + kept.map { Self.percentEncode($0) }.joined(separator: "/") + trailing
    }

    private static func canonicalQuery(_ items: [(name: String, value: String)]) -> String {
        items.map { (percentEncode($0.name), percentEncode($0.value)) }
            .sorted { $0.0 != $1.0 ? Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8))
                                   : Array($0.1.utf8).lexicographicallyPrecedes(Array($1.1.utf8)) }
            .map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
    }

    private static func canonicalHeaders(_ headers: [(name: String, value: String)]) -> (String, String) {
        var values: [String: [String]] = [:]
        for (name, value) in headers {
            values[name.lowercased(), default: []].append(collapseSpaces(value))
        }
        let names = values.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let lines = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        return (lines, names.joined(separator: ";"))
    }

    private static func collapseSpaces(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters, as UTF-8, uppercase hex.
    package static func percentEncode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0xF)])
            }
        }
        return out
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    // MARK: - Keys

    private func signingKey(day: String) -> [UInt8] {
        let dateKey = hmac(key: Array("AWS4\(secretAccessKey)".utf8), day)
        let regionKey = hmac(key: dateKey, region)
        let serviceKey = hmac(key: regionKey, service)
        return hmac(key: serviceKey, "aws4_request")
    }

    private func hmac(key: [UInt8], _ message: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(message.utf8), using: SymmetricKey(data: key)))
    }

    private static let hexDigits = Array("0123456789ABCDEF")
    private static let lowerHexDigits = Array("0123456789abcdef")

    private static func hex(_ bytes: [UInt8]) -> String {
        var out = ""
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(lowerHexDigits[Int(byte >> 4)])
            out.append(lowerHexDigits[Int(byte & 0xF)])
        }
        return out
    }

    private static let utcCalendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
