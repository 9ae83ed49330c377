import Foundation
import Testing
@testable import ContentStoreCluster

/// Known answers from AWS's published Signature Version 4 test suite (aws-sig-v4-test-suite):
/// credentials AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region us-east-1, service
/// "service", 2015-08-30T12:36:00Z. Each case checks the canonical request and the Authorization
/// header byte for byte.
@Suite struct SigV4SignerTests {
    struct Vector: CustomTestStringConvertible, Sendable {
        var name: String
        var method: String
        var path: String
        var query: [(name: String, value: String)] = []
        var headers: [(name: String, value: String)] = []
        var body: String = ""
        var canonicalRequest: String
        var signature: String
        var signedHeaders = "host;x-amz-date"
        var testDescription: String { name }
    }

    static let date = Date(timeIntervalSince1970: 1_440_938_160)  // 2015-08-30T12:36:00Z
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    static let host: [(name: String, value: String)] = [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")]

    static func plain(_ name: String, _ method: String, _ path: String, query: [(name: String, value: String)] = [],
                      canonicalPath: String = "/", canonicalQuery: String = "", signature: String) -> Vector {
        Vector(name: name, method: method, path: path, query: query, headers: host,
               canonicalRequest: "\(method)\n\(canonicalPath)\n\(canonicalQuery)\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
               signature: signature)
    }

    static let vectors: [Vector] = [
        plain("get-vanilla", "GET", "/", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        plain("post-vanilla", "POST", "/", signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        plain("get-vanilla-empty-query-key", "GET", "/", query: [("Param1", "value1")], canonicalQuery: "Param1=value1",
              signature: "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"),
        plain("get-vanilla-query-order-key", "GET", "/", query: [("Param1", "value2"), ("Param1", "Value1")],
              canonicalQuery: "Param1=Value1&Param1=value2", signature: "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"),
        plain("get-vanilla-query-order-key-case", "GET", "/", query: [("Param2", "value2"), ("Param1", "value1")],
              canonicalQuery: "Param1=value1&Param2=value2", signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        plain("get-vanilla-query-order-value", "GET", "/", query: [("Param1", "value2"), ("Param1", "value1")],
              canonicalQuery: "Param1=value1&Param1=value2", signature: "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
        plain("get-vanilla-query-unreserved", "GET", "/",
              query: [("-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")],
              canonicalQuery: "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
              signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
        plain("get-vanilla-utf8-query", "GET", "/", query: [("\u{1234}", "bar")], canonicalQuery: "%E1%88%B4=bar",
              signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
        plain("post-vanilla-query", "POST", "/", query: [("Param1", "value1")], canonicalQuery: "Param1=value1",
              signature: "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
        plain("get-unreserved", "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
              canonicalPath: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
              signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
        plain("get-space", "GET", "/example space/", canonicalPath: "/example%20space/",
              signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
        // normalize-path
        plain("get-relative", "GET", "/example/..", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        plain("get-relative-relative", "GET", "/example1/example2/../..", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        plain("get-slash", "GET", "//", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        plain("get-slash-dot-slash", "GET", "/./", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        plain("get-slash-pointless-dot", "GET", "/./example", canonicalPath: "/example",
              signature: "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"),
        plain("get-slashes", "GET", "//example//", canonicalPath: "/example/",
              signature: "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"),
        // headers
        Vector(name: "get-header-key-duplicate", method: "GET", path: "/",
               headers: [("Host", "example.amazonaws.com"), ("My-Header1", "value2"), ("My-Header1", "value2"),
                         ("My-Header1", "value1"), ("X-Amz-Date", "20150830T123600Z")],
               canonicalRequest: "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
               signature: "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
               signedHeaders: "host;my-header1;x-amz-date"),
        Vector(name: "get-header-value-order", method: "GET", path: "/",
               headers: [("Host", "example.amazonaws.com"), ("My-Header1", "value4"), ("My-Header1", "value1"),
                         ("My-Header1", "value3"), ("My-Header1", "value2"), ("X-Amz-Date", "20150830T123600Z")],
               canonicalRequest: "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value4,value1,value3,value2\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
               signature: "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
               signedHeaders: "host;my-header1;x-amz-date"),
        Vector(name: "get-header-value-trim", method: "GET", path: "/",
               headers: [("Host", "example.amazonaws.com"), ("My-Header1", " value1"), ("My-Header2", " \"a   b   c\""),
                         ("X-Amz-Date", "20150830T123600Z")],
               canonicalRequest: "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n\(emptyHash)",
               signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
               signedHeaders: "host;my-header1;my-header2;x-amz-date"),
        Vector(name: "post-header-key-sort", method: "POST", path: "/",
               headers: [("Host", "example.amazonaws.com"), ("My-Header1", "value1"), ("X-Amz-Date", "20150830T123600Z")],
               canonicalRequest: "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
               signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
               signedHeaders: "host;my-header1;x-amz-date"),
        Vector(name: "post-header-value-case", method: "POST", path: "/",
               headers: [("Host", "example.amazonaws.com"), ("My-Header1", "VALUE1"), ("X-Amz-Date", "20150830T123600Z")],
               canonicalRequest: "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:VALUE1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
               signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
               signedHeaders: "host;my-header1;x-amz-date"),
        Vector(name: "post-x-www-form-urlencoded", method: "POST", path: "/",
               headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Host", "example.amazonaws.com"),
                         ("X-Amz-Date", "20150830T123600Z")],
               body: "Param1=value1",
               canonicalRequest: "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
               signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
               signedHeaders: "content-type;host;x-amz-date"),
        Vector(name: "post-sts-header-before", method: "POST", path: "/",
               headers: host + [("X-Amz-Security-Token", stsToken)],
               canonicalRequest: "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:\(stsToken)\n\nhost;x-amz-date;x-amz-security-token\n\(emptyHash)",
               signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
               signedHeaders: "host;x-amz-date;x-amz-security-token"),
    ]

    static let stsToken = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

    static let signer = SigV4Signer(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                    region: "us-east-1", service: "service", normalizesPath: true)

    @Test(arguments: vectors)
    func publishedVector(_ vector: Vector) {
        let request = SigV4Signer.Request(method: vector.method, path: vector.path, query: vector.query, headers: vector.headers,
                                          payloadHash: SigV4Signer.hexSHA256(Array(vector.body.utf8)))
        let signature = Self.signer.sign(request, at: Self.date)
        #expect(signature.canonicalRequest == vector.canonicalRequest)
        #expect(signature.authorization == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            + "SignedHeaders=\(vector.signedHeaders), Signature=\(vector.signature)")
    }

    @Test func stringToSignOfGetVanilla() {
        let request = SigV4Signer.Request(method: "GET", path: "/", headers: Self.host, payloadHash: Self.emptyHash)
        #expect(Self.signer.sign(request, at: Self.date).stringToSign
            == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")
    }

    /// AWS's S3 documentation example (GET /test.txt with a Range header): S3 signs the key as
    /// written and includes x-amz-content-sha256.
    @Test func s3DocumentationExample() {
        let signer = SigV4Signer(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 region: "us-east-1", service: "s3", normalizesPath: false)
        let request = SigV4Signer.Request(
            method: "GET", path: "/test.txt",
            headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
                      ("x-amz-content-sha256", Self.emptyHash), ("x-amz-date", "20130524T000000Z")],
            payloadHash: Self.emptyHash)
        let signature = signer.sign(request, at: Date(timeIntervalSince1970: 1_369_353_600))
        #expect(signature.authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func s3KeepsDotSegmentsAndRepeatedSlashes() {
        let signer = SigV4Signer(accessKeyID: "A", secretAccessKey: "S", region: "us-east-1", service: "s3", normalizesPath: false)
        let request = SigV4Signer.Request(method: "GET", path: "/bucket/a//./b c", headers: Self.host, payloadHash: Self.emptyHash)
        #expect(signer.sign(request, at: Self.date).canonicalRequest.split(separator: "\n")[1] == "/bucket/a//./b%20c")
    }

    @Test func noStringContainsTheSecret() {
        let request = SigV4Signer.Request(method: "GET", path: "/", headers: Self.host, payloadHash: Self.emptyHash)
        let signature = Self.signer.sign(request, at: Self.date)
        for text in [signature.canonicalRequest, signature.stringToSign, signature.authorization] {
            #expect(!text.contains("wJalrXUtnFEMI"))
        }
    }

    @Test func timestampIsUTC() {
        #expect(SigV4Signer.timestamp(Self.date) == "20150830T123600Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 0)) == "19700101T000000Z")
    }
}
