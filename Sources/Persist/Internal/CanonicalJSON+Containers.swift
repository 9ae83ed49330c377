// The three containers of `CanonicalJSONWriter`. Each knows the depth of the value it belongs to
// and writes only while that value is the innermost being encoded; nested containers and
// super-encoders are not mirrored (they would interleave values), so they make the writer give up.
import Foundation

extension CanonicalJSONWriter {
    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: CanonicalJSONWriter
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            writer.writeNull()
        }
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            writer.writeBool(value)
        }
        mutating func encode(_ value: String, forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            writer.writeString(value)
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(value, key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            try writer.encodeValue(value)
        }

        private func integer<I: FixedWidthInteger>(_ value: I, _ key: Key) throws {
            try writer.beginMember(key.stringValue, depth: depth)
            writer.writeInteger(value)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            _ = writer.fail()
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(writer: writer, depth: -1))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            _ = writer.fail()
            return UnkeyedContainer(writer: writer, depth: -1)
        }
        mutating func superEncoder() -> any Encoder {
            _ = writer.fail()
            return writer
        }
        mutating func superEncoder(forKey key: Key) -> any Encoder {
            _ = writer.fail()
            return writer
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let writer: CanonicalJSONWriter
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var count: Int { writer.elementCount(at: depth) }

        mutating func encodeNil() throws {
            try writer.beginElement(depth: depth)
            writer.writeNull()
        }
        mutating func encode(_ value: Bool) throws {
            try writer.beginElement(depth: depth)
            writer.writeBool(value)
        }
        mutating func encode(_ value: String) throws {
            try writer.beginElement(depth: depth)
            writer.writeString(value)
        }
        mutating func encode(_ value: Double) throws {
            try writer.beginElement(depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Float) throws {
            try writer.beginElement(depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Int) throws { try integer(value) }
        mutating func encode(_ value: Int8) throws { try integer(value) }
        mutating func encode(_ value: Int16) throws { try integer(value) }
        mutating func encode(_ value: Int32) throws { try integer(value) }
        mutating func encode(_ value: Int64) throws { try integer(value) }
        mutating func encode(_ value: UInt) throws { try integer(value) }
        mutating func encode(_ value: UInt8) throws { try integer(value) }
        mutating func encode(_ value: UInt16) throws { try integer(value) }
        mutating func encode(_ value: UInt32) throws { try integer(value) }
        mutating func encode(_ value: UInt64) throws { try integer(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.beginElement(depth: depth)
            try writer.encodeValue(value)
        }

        private func integer<I: FixedWidthInteger>(_ value: I) throws {
            try writer.beginElement(depth: depth)
            writer.writeInteger(value)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            _ = writer.fail()
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(writer: writer, depth: -1))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            _ = writer.fail()
            return UnkeyedContainer(writer: writer, depth: -1)
        }
        mutating func superEncoder() -> any Encoder {
            _ = writer.fail()
            return writer
        }
    }

    struct SingleContainer: SingleValueEncodingContainer {
        let writer: CanonicalJSONWriter
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws {
            try writer.beginSingle(depth: depth)
            writer.writeNull()
        }
        mutating func encode(_ value: Bool) throws {
            try writer.beginSingle(depth: depth)
            writer.writeBool(value)
        }
        mutating func encode(_ value: String) throws {
            try writer.beginSingle(depth: depth)
            writer.writeString(value)
        }
        mutating func encode(_ value: Double) throws {
            try writer.beginSingle(depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Float) throws {
            try writer.beginSingle(depth: depth)
            try writer.writeFloat(value)
        }
        mutating func encode(_ value: Int) throws { try integer(value) }
        mutating func encode(_ value: Int8) throws { try integer(value) }
        mutating func encode(_ value: Int16) throws { try integer(value) }
        mutating func encode(_ value: Int32) throws { try integer(value) }
        mutating func encode(_ value: Int64) throws { try integer(value) }
        mutating func encode(_ value: UInt) throws { try integer(value) }
        mutating func encode(_ value: UInt8) throws { try integer(value) }
        mutating func encode(_ value: UInt16) throws { try integer(value) }
        mutating func encode(_ value: UInt32) throws { try integer(value) }
        mutating func encode(_ value: UInt64) throws { try integer(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.beginSingle(depth: depth)
            try writer.encodeValue(value)
        }

        private func integer<I: FixedWidthInteger>(_ value: I) throws {
            try writer.beginSingle(depth: depth)
            writer.writeInteger(value)
        }
    }
}
