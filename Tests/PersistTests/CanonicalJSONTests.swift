import ContentStore
import Foundation
import Testing
@testable import Persist

/// Bodies must be byte for byte what `JSONEncoder` (sorted keys, slashes unescaped, dates deferred)
/// writes, or a save of an unchanged entity stops being a no-op on a store written before the
/// one-pass encoder: every value here is encoded both ways and compared.
@Suite struct CanonicalJSONTests {
    /// Members declared out of key order, every scalar kind, optionals, nesting, collections.
    struct Everything: Codable {
        var zeta: String
        var alpha: Int
        var Beta: Double
        var é: Float
        var _under: Bool
        var k10: Int8
        var k9: Int16
        var i32: Int32
        var i64: Int64
        var u: UInt
        var u8: UInt8
        var u16: UInt16
        var u32: UInt32
        var u64: UInt64
        var date: Date
        var id: UUID
        var maybe: String?
        var maybeNumber: Double?
        var inner: Inner
        var list: [Inner]
        var words: [String]
        var table: [String: Int]
        var numbered: [Int: String]
        var nested: [[Double?]]
        var kind: Kind
        var empty: Empty
    }

    struct Inner: Codable {
        var b: String
        var a: [Int]
        var c: Date?
    }

    struct Empty: Codable {}

    enum Kind: String, Codable { case small, large }

    /// A hand-written `encode(to:)`: keys that sort differently by bytes than by case or number,
    /// a key written twice (the last value counts), nil written explicitly.
    struct Custom: Codable {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        var value: Int

        init(value: Int) { self.value = value }
        init(from decoder: any Decoder) throws { value = 0 }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for name in ["b", "B", "a\"q", "a/b", "10", "9", "", "\u{7F}", "日本", "a"] {
                try container.encode(value, forKey: Key(stringValue: name))
            }
            try container.encode("again", forKey: Key(stringValue: "b"))
            try container.encodeNil(forKey: Key(stringValue: "null"))
        }
    }

    /// What the one-pass encoder does not mirror: it must give up, and bodies still match.
    struct Special: Codable {
        var data: Data
        var url: URL
        var decimal: Decimal
    }

    enum WithPayload: Codable {
        case one(Int, label: String)
    }

    @Test(arguments: 0 ..< 4)
    func randomValuesEncodeAsJSONEncoderDoes(seed: UInt64) throws {
        var random = SplitMix64(seed: 0x5EED_0000 + seed)
        for round in 0 ..< 250 {
            let value = Everything.random(&random)
            let fast = try #require(CanonicalJSON.encode(value), "round \(round): the one-pass path gave up")
            let foundation = try BodyCoding.encoder.encode(value)
            #expect(Data(fast) == foundation, "round \(round): \(String(decoding: fast, as: UTF8.self)) against \(String(decoding: foundation, as: UTF8.self))")
        }
    }

    @Test func numbersAtTheirEdgesEncodeAsJSONEncoderDoes() throws {
        let doubles: [Double] = [0, -0.0, 1, -1, 0.1, 1e15, 1e16, 1e17, 1e-5, 1e-7, 123456789.125, .pi, .ulpOfOne,
                                 .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude * 3]
        let floats: [Float] = [0, -0.0, 0.1, 1e10, 3.4e38, .leastNonzeroMagnitude, 16777216, 1.5e-7]
        let integers: [Int64] = [0, -1, .min, .max]
        try expectSameBytes(doubles)
        try expectSameBytes(floats)
        try expectSameBytes(integers)
        try expectSameBytes([UInt64.max, 0])
        try expectSameBytes(doubles.map { Date(timeIntervalSinceReferenceDate: $0) })
    }

    /// Whole doubles below 2^53 are written as integers without formatting the float; at 2^53 and
    /// beyond, and for -0, `description`'s own form (exponents, the sign) must still come out.
    @Test func wholeDoublesEncodeAsJSONEncoderDoes() throws {
        let limit = 9_007_199_254_740_992.0  // 2^53
        let wholes: [Double] = [1, 7, 10, 42, 600_000_000, 4_503_599_627_370_497, limit - 1, limit, limit + 2, 2 * limit, 1e15 + 1, 123_456_789_012_345]
        let doubles = wholes + wholes.map { -$0 } + [-0.0, 0, 0.5, 1.5, limit - 0.5]
        try expectSameBytes(doubles)
        try expectSameBytes(doubles.map { Date(timeIntervalSinceReferenceDate: $0) })
        try expectSameBytes(doubles.map { ["budgeted": $0] })
    }

    @Test func stringsEscapeAsJSONEncoderDoes() throws {
        let controls = String(decoding: (0 ..< 0x20).map { UInt8($0) }, as: UTF8.self)
        try expectSameBytes(["", "plain", "\"quoted\" \\ back/slash", controls, "\u{7F}\u{80}é日本🙂", "e\u{301}", "a\u{2028}b"])
    }

    @Test func handWrittenEncodingsEncodeAsJSONEncoderDoes() throws {
        try expectSameBytes(Custom(value: 7))
        try expectSameBytes([Custom(value: 1), Custom(value: 2)])
        try expectSameBytes(Empty())
        try expectSameBytes([String: [Int]]())
    }

    @Test func whatThisPathDoesNotMirrorFallsBackToJSONEncoder() throws {
        let special = Special(data: Data([0, 1, 254, 255]), url: URL(string: "https://example.com/a/b?c=d")!, decimal: Decimal(string: "12.345")!)
        #expect(CanonicalJSON.encode(special) == nil)
        #expect(CanonicalJSON.encode(WithPayload.one(3, label: "x")) == nil)  // a nested container
        #expect(CanonicalJSON.encode(Double.nan) == nil)
        let entity = SpecialEntity(id: UUID.numbered(1), special: special, payload: .one(3, label: "x"))
        #expect(try BodyCoding.encode(entity) == BodyCoding.encoder.encode(entity))
        let nan = NumberEntity(id: UUID.numbered(2), number: .nan)
        #expect(throws: EncodingError.self) { try BodyCoding.encode(nan) }
    }

    @Test func anEntityBodyRoundTripsDatesAtFullPrecision() throws {
        var random = SplitMix64(seed: 42)
        for _ in 0 ..< 200 {
            let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: random.next() & 0x41FF_FFFF_FFFF_FFFF))
            let item = Item(id: UUID.numbered(3), label: "t", amount: 1, date: date)
            let body = try BodyCoding.encode(item)
            #expect(body == (try BodyCoding.encoder.encode(item)))
            #expect(try BodyCoding.decode(Item.self, from: body, id: item.id).date == date)
        }
    }

    private func expectSameBytes<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fast = try #require(CanonicalJSON.encode(value), sourceLocation: sourceLocation)
        let foundation = try BodyCoding.encoder.encode(value)
        #expect(Data(fast) == foundation, "\(String(decoding: fast, as: UTF8.self)) against \(String(decoding: foundation, as: UTF8.self))",
                sourceLocation: sourceLocation)
    }
}

struct SpecialEntity: Entity {
    static let entityName = "Special"
    var id: UUID
    var special: CanonicalJSONTests.Special
    var payload: CanonicalJSONTests.WithPayload
}

struct NumberEntity: Entity {
    static let entityName = "Number"
    var id: UUID
    var number: Double
}

extension CanonicalJSONTests.Everything {
    static func random(_ random: inout SplitMix64) -> Self {
        func string() -> String {
            let alphabet = Array("abcXYZ 09/\\\"\n\t\u{1}\u{1F}é日🙂\u{7F}")
            return String((0 ..< Int.random(in: 0 ... 12, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
        }
        func double() -> Double {
            let bits = random.next()
            return switch bits % 4 {
            case 0: Double(Int.random(in: -1_000_000 ... 1_000_000, using: &random))
            case 1: Double.random(in: -1e6 ... 1e6, using: &random)
            case 2: Double(Int.random(in: -9 ... 9, using: &random)) * pow(10, Double(Int.random(in: -30 ... 30, using: &random)))
            default: Double(bitPattern: bits).isFinite ? Double(bitPattern: bits) : Double(bitPattern: bits & 0x3FFF_FFFF_FFFF_FFFF)
            }
        }
        func inner() -> CanonicalJSONTests.Inner {
            .init(b: string(), a: (0 ..< Int.random(in: 0 ... 3, using: &random)).map { _ in Int.random(in: -99 ... 99, using: &random) },
                  c: Bool.random(using: &random) ? Date(timeIntervalSinceReferenceDate: double()) : nil)
        }
        var uuidBytes = (0 ..< 16).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
        uuidBytes[6] = uuidBytes[6] & 0x0F | 0x40
        let id = UUID(uuid: (uuidBytes[0], uuidBytes[1], uuidBytes[2], uuidBytes[3], uuidBytes[4], uuidBytes[5], uuidBytes[6], uuidBytes[7],
                             uuidBytes[8], uuidBytes[9], uuidBytes[10], uuidBytes[11], uuidBytes[12], uuidBytes[13], uuidBytes[14], uuidBytes[15]))
        return .init(
            zeta: string(), alpha: Int.random(in: .min ... .max, using: &random), Beta: double(),
            é: Float(Double.random(in: -1e5 ... 1e5, using: &random)), _under: Bool.random(using: &random),
            k10: .random(in: .min ... .max, using: &random), k9: .random(in: .min ... .max, using: &random),
            i32: .random(in: .min ... .max, using: &random), i64: .random(in: .min ... .max, using: &random),
            u: .random(in: .min ... .max, using: &random), u8: .random(in: .min ... .max, using: &random),
            u16: .random(in: .min ... .max, using: &random), u32: .random(in: .min ... .max, using: &random),
            u64: .random(in: .min ... .max, using: &random),
            date: Date(timeIntervalSinceReferenceDate: double()), id: id,
            maybe: Bool.random(using: &random) ? string() : nil, maybeNumber: Bool.random(using: &random) ? double() : nil,
            inner: inner(), list: (0 ..< Int.random(in: 0 ... 3, using: &random)).map { _ in inner() },
            words: (0 ..< Int.random(in: 0 ... 4, using: &random)).map { _ in string() },
            table: Dictionary((0 ..< Int.random(in: 0 ... 5, using: &random)).map { _ in (string(), Int.random(in: -5 ... 5, using: &random)) },
                              uniquingKeysWith: { $1 }),
            numbered: Dictionary((0 ..< Int.random(in: 0 ... 5, using: &random)).map { _ in (Int.random(in: -20 ... 20, using: &random), string()) },
                                 uniquingKeysWith: { $1 }),
            nested: (0 ..< Int.random(in: 0 ... 2, using: &random)).map { _ in
                (0 ..< Int.random(in: 0 ... 3, using: &random)).map { _ in Bool.random(using: &random) ? double() : nil }
            },
            kind: Bool.random(using: &random) ? .small : .large, empty: .init())
    }
}
