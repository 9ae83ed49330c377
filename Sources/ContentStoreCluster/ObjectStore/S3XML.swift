import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The two XML documents the client reads: a ListObjectsV2 result and an error document.
/// Both are parsed into flat element paths (`ListBucketResult/Contents/Key`), enough for S3's
/// shallow documents, with XMLParser doing entity decoding.
enum S3ListingParser {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ body: [UInt8]) throws -> ObjectListing {
        let elements = try XMLElements.parse(body)
        guard elements.root == "ListBucketResult" else {
            throw Malformed(description: "root element is \(elements.root ?? "missing"), not ListBucketResult")
        }
        var objects: [ObjectInfo] = []
        for group in elements.groups(named: "Contents") {
            guard let key = group["Key"], let size = group["Size"].flatMap({ UInt64($0) }) else {
                throw Malformed(description: "a Contents element lacks Key or Size")
            }
            let etag = group["ETag"].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) } ?? ""
            objects.append(ObjectInfo(key: key, size: size, etag: etag,
                                      lastModified: group["LastModified"].flatMap(parseDate)))
        }
        let truncated = elements.topLevel["IsTruncated"] == "true"
        let next = elements.topLevel["NextContinuationToken"]
        if truncated && next == nil { throw Malformed(description: "truncated listing without NextContinuationToken") }
        return ObjectListing(objects: objects, continuation: truncated ? next : nil)
    }

    private static func parseDate(_ text: String) -> Date? {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        return (try? withFraction.parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text))
    }
}

/// `<Error><Code>…</Code><Message>…</Message><RequestId>…</RequestId></Error>`.
struct S3ErrorDocument {
    var code: String?
    var message: String?
    var requestID: String?

    init?(_ body: [UInt8]) {
        guard !body.isEmpty, let elements = try? XMLElements.parse(body), elements.root == "Error" else { return nil }
        code = elements.topLevel["Code"]
        message = elements.topLevel["Message"]
        requestID = elements.topLevel["RequestId"]
    }
}

/// Text of the root's children (`topLevel`) and of the children of each repeated child group.
private struct XMLElements {
    var root: String?
    var topLevel: [String: String] = [:]
    var groupList: [(name: String, fields: [String: String])] = []

    func groups(named name: String) -> [[String: String]] {
        groupList.filter { $0.name == name }.map(\.fields)
    }

    static func parse(_ body: [UInt8]) throws -> XMLElements {
        let delegate = Delegate()
        let parser = XMLParser(data: Data(body))
        parser.delegate = delegate
        guard parser.parse() else {
            throw S3ListingParser.Malformed(description: parser.parserError.map { "\($0)" } ?? "XML does not parse")
        }
        return delegate.result
    }

    private final class Delegate: NSObject, XMLParserDelegate {
        var result = XMLElements()
        private var path: [String] = []
        private var text = ""
        private var group: [String: String] = [:]

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            if path.isEmpty { result.root = name }
            if path.count == 1 { group = [:] }
            path.append(name)
            text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            switch path.count {
            case 2:
                if group.isEmpty { result.topLevel[name] = text } else { result.groupList.append((name, group)) }
            case 3:
                group[name] = text
            default:
                break
            }
            path.removeLast()
            text = ""
        }
    }
}
