import ContentStore
import Foundation

// One value of a state in its canonical JSON form, split into parts that are stored as blobs of
// their own. Invariant owned here: a node's `fragment`, expanded (``PartFormat/expand``), is exactly
// the canonical JSON of the value it was built from, and `parts` lists every part that expansion
// needs; a node never changes after it is built, so a subtree equal to the last version's is reused
// as it is (digests and all) and costs nothing to store again.
//
// Splitting (Docs/statelens.md, "Large states"): a string or number longer than
// ``PartFormat/partSize`` is a part of its own; an object or array whose members together exceed it
// is cut, at member boundaries chosen by the members' content, into chunks of roughly that size,
// each chunk a part. The container's own fragment is then its brackets around the chunks'
// references. A change to one field re-stores only the chunk holding it (and the chunks above it
// that hold a changed reference), never the whole state.

/// Byte format of templates: canonical JSON text in which `0x00` followed by a 32-byte SHA-256 digest
/// stands for the expansion of that part. JSON text never holds a raw `0x00` (control characters
/// are escaped inside strings), so the marker is unambiguous.
enum PartFormat {
    /// Marks a reference to a part.
    static let marker: UInt8 = 0x00
    /// A reference: marker + digest.
    static let referenceSize = 1 + Digest.byteCount
    /// The size above which a scalar is a part of its own and a container is cut into chunks.
    static let partSize = 16 * 1024
    /// A chunk ends after a member whose fingerprint has these bits clear, once it holds at least a
    /// quarter of ``partSize``: boundaries follow content, so inserting a member moves only its own.
    static let boundaryMask: UInt64 = 0x3

    static func appendReference(_ digest: Digest, to bytes: inout [UInt8]) {
        bytes.append(marker)
        digest.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// The digests a template refers to, in order.
    static func references(in template: [UInt8]) throws -> [Digest] {
        var digests: [Digest] = []
        try scan(template) { _ in } reference: { digests.append($0) }
        return digests
    }

    /// The full JSON of `template`, reading each part with `part` (recursively).
    static func expand(_ template: [UInt8], part: (Digest) throws -> [UInt8]) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(template.count)
        func append(_ template: [UInt8], depth: Int) throws {
            guard depth < maximumDepth else { throw damaged("parts nest deeper than \(maximumDepth) levels") }
            try scan(template) { output.append(contentsOf: $0) } reference: { digest in
                try append(try part(digest), depth: depth + 1)
            }
        }
        try append(template, depth: 0)
        return output
    }

    /// Nesting that no state built here reaches (each level is a part of at least `partSize / 4`
    /// bytes of references); deeper is damage, not a state.
    static let maximumDepth = 64

    private static func scan(_ template: [UInt8], text: (ArraySlice<UInt8>) throws -> Void, reference: (Digest) throws -> Void) throws {
        var start = 0
        var index = 0
        while index < template.count {
            guard template[index] == marker else { index += 1; continue }
            if index > start { try text(template[start ..< index]) }
            guard index + referenceSize <= template.count else { throw damaged("a part reference at offset \(index) is truncated") }
            let digest = template.withUnsafeBytes { Digest(bytes: UnsafeRawBufferPointer(rebasing: $0[(index + 1) ..< (index + referenceSize)])) }
            try reference(digest)
            index += referenceSize
            start = index
        }
        if index > start { try text(template[start ..< index]) }
    }

    static func damaged(_ what: String) -> StoreError {
        StoreError(code: .corrupted, message: "StateLens state is damaged: \(what)")
    }
}

/// A part to store: its digest and bytes.
struct Part: Sendable {
    var digest: Digest
    var bytes: [UInt8]
}

/// A node of the canonical JSON tree (see the top of this file).
///
/// `@unchecked Sendable`: every stored property is a `let` set in `init`; `source` holds a value
/// of the `Sendable` root state (or a part of one), kept only to be compared with `==`.
final class StateNode: @unchecked Sendable {
    enum Kind {
        case scalar
        /// Keys ascending by UTF-8 bytes, each with its value's node.
        case object(keys: [String], children: [StateNode])
        case array([StateNode])
    }

    /// A chunk of a large container: which members it holds, and the part storing them.
    struct Chunk {
        var members: [ObjectIdentifier]
        var part: Part

        /// Whether the chunk holds exactly `nodes`, in order.
        func holds(_ nodes: ArraySlice<StateNode>) -> Bool {
            members.count == nodes.count && zip(members, nodes).allSatisfy { $0 == ObjectIdentifier($1) }
        }
    }

    let kind: Kind
    /// The Swift value this node encodes, when it is `Equatable`: an equal value encodes to this node.
    let source: Any?
    /// What a parent embeds: the inline JSON, possibly with references.
    let fragment: [UInt8]
    /// The part this node is stored in, when it is a part of its own (a large scalar).
    let ownPart: Part?
    /// The chunks of a large container.
    let chunks: [Chunk]
    /// Every part the fragment's expansion needs, this subtree's own and its descendants'.
    let parts: [Digest]
    /// A hash of the fragment, for chunk boundaries.
    let fingerprint: UInt64

    private init(kind: Kind, source: Any?, fragment: [UInt8], ownPart: Part?, chunks: [Chunk], parts: [Digest]) {
        self.kind = kind
        self.source = source
        self.fragment = fragment
        self.ownPart = ownPart
        self.chunks = chunks
        self.parts = parts
        self.fingerprint = StateNode.fnv(fragment[...])
    }

    /// A string, number, boolean or null, as its JSON text.
    static func scalar(_ json: [UInt8], source: Any?) -> StateNode {
        guard json.count > PartFormat.partSize else {
            return StateNode(kind: .scalar, source: source, fragment: json, ownPart: nil, chunks: [], parts: [])
        }
        let part = Part(digest: Digest.sha256(json), bytes: json)
        var fragment: [UInt8] = []
        PartFormat.appendReference(part.digest, to: &fragment)
        return StateNode(kind: .scalar, source: source, fragment: fragment, ownPart: part, chunks: [], parts: [part.digest])
    }

    /// An object; `members` need not be sorted. `previous` is the node this one replaces, whose
    /// chunks are reused where they hold the same member nodes.
    static func object(_ members: [(key: String, node: StateNode)], source: Any?, previous: StateNode?) -> StateNode {
        let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let texts = sorted.map { member -> [UInt8] in
            var text = JSONText.string(member.key)
            text.append(UInt8(ascii: ":"))
            text.append(contentsOf: member.node.fragment)
            return text
        }
        let keys = sorted.map(\.key)
        let children = sorted.map(\.node)
        let fingerprints = zip(keys, children).map { StateNode.fnv(Array($0.0.utf8)[...]) ^ $0.1.fingerprint }
        return container(kind: .object(keys: keys, children: children), open: UInt8(ascii: "{"), close: UInt8(ascii: "}"),
                         children: children, size: texts.reduce(0) { $0 + $1.count }, text: { texts[$0] }, fingerprint: { fingerprints[$0] },
                         source: source, previous: previous)
    }

    /// An array, in order. Its members' texts are their fragments, read in place: an array of a
    /// thousand elements is not copied into lists of texts and fingerprints on every update.
    static func array(_ elements: [StateNode], source: Any?, previous: StateNode?) -> StateNode {
        container(kind: .array(elements), open: UInt8(ascii: "["), close: UInt8(ascii: "]"),
                  children: elements, size: elements.reduce(0) { $0 + $1.fragment.count },
                  text: { elements[$0].fragment }, fingerprint: { elements[$0].fingerprint },
                  source: source, previous: previous)
    }

    /// A container of `children`, whose texts (`text(i)`: the member's JSON, with its key in an
    /// object) add up to `size` bytes.
    private static func container(kind: Kind, open: UInt8, close: UInt8, children: [StateNode], size textBytes: Int,
                                  text: (Int) -> [UInt8], fingerprint: (Int) -> UInt64, source: Any?, previous: StateNode?) -> StateNode {
        var parts = children.flatMap(\.parts)
        var fragment: [UInt8] = [open]
        guard textBytes + 2 + max(0, children.count - 1) > PartFormat.partSize else {
            for index in children.indices {
                if index > 0 { fragment.append(UInt8(ascii: ",")) }
                fragment.append(contentsOf: text(index))
            }
            fragment.append(close)
            return StateNode(kind: kind, source: source, fragment: fragment, ownPart: nil, chunks: [], parts: parts)
        }
        let chunks = chunked(children, text: text, fingerprint: fingerprint, previous: previous?.chunks ?? [])
        for (index, chunk) in chunks.enumerated() {
            if index > 0 { fragment.append(UInt8(ascii: ",")) }
            PartFormat.appendReference(chunk.part.digest, to: &fragment)
            parts.append(chunk.part.digest)
        }
        fragment.append(close)
        return StateNode(kind: kind, source: source, fragment: fragment, ownPart: nil, chunks: chunks, parts: parts)
    }

    /// Cuts `children` into chunks (Docs/statelens.md, "Large states"), reusing the previous
    /// version's chunks without looking at their members' texts: where a chunk begins at a member
    /// an old chunk began at and holds the same member nodes, it ends where the old one did, because
    /// a boundary depends only on the members since the chunk's start. (The old last chunk ended
    /// with its container, so it is reused only at the end of this one.) An update of one element of
    /// a large array so costs one step per chunk, plus the members of the chunks it changed.
    private static func chunked(_ children: [StateNode], text: (Int) -> [UInt8], fingerprint: (Int) -> UInt64,
                                previous: [Chunk]) -> [Chunk] {
        var reusable: [ObjectIdentifier: (chunk: Chunk, isLast: Bool)] = [:]
        reusable.reserveCapacity(previous.count)
        for (index, chunk) in previous.enumerated() {
            if let first = chunk.members.first { reusable[first] = (chunk, index == previous.count - 1) }
        }
        var chunks: [Chunk] = []
        var start = 0
        var size = 0
        var index = 0
        while index < children.count {
            if index == start, let old = reusable[ObjectIdentifier(children[start])] {
                let end = start + old.chunk.members.count
                if end <= children.count, !old.isLast || end == children.count, old.chunk.holds(children[start ..< end]) {
                    chunks.append(old.chunk)
                    (start, index) = (end, end)
                    continue
                }
            }
            size += text(index).count + 1
            let atBoundary = size >= PartFormat.partSize / 4 && StateNode.mix(fingerprint(index)) & PartFormat.boundaryMask == 0
            guard atBoundary || size >= PartFormat.partSize || index == children.count - 1 else {
                index += 1
                continue
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(size)
            for member in start ... index {
                if member > start { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: text(member))
            }
            let members = children[start ... index].map { ObjectIdentifier($0) }
            chunks.append(Chunk(members: members, part: Part(digest: Digest.sha256(bytes), bytes: bytes)))
            (start, index, size) = (index + 1, index + 1, 0)
        }
        return chunks
    }

    /// The child under `key` of an object node.
    func child(forKey key: String) -> StateNode? {
        guard case let .object(keys, children) = kind else { return nil }
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] == key { return children[middle] }
            if keys[middle].utf8.lexicographicallyPrecedes(key.utf8) { low = middle + 1 } else { high = middle }
        }
        return nil
    }

    /// The elements of an array node; empty for another kind.
    var elements: [StateNode] {
        guard case let .array(elements) = kind else { return [] }
        return elements
    }

    /// The element at `index` of an array node.
    func child(at index: Int) -> StateNode? {
        guard case let .array(elements) = kind, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The parts of this subtree that are not in `known` (sorted ascending: the last version
    /// record's parts), to be put before the commit that refers to them. A known part's whole
    /// subtree is known: its bytes name its children's digests.
    func newParts(excluding known: [Digest], into output: inout [Digest: Part]) {
        if let ownPart {
            if !known.sortedContains(ownPart.digest) { output[ownPart.digest] = ownPart }
            return
        }
        let children: [StateNode]
        switch kind {
        case .scalar: return
        case let .object(_, nodes): children = nodes
        case let .array(nodes): children = nodes
        }
        guard !chunks.isEmpty else {
            for child in children { child.newParts(excluding: known, into: &output) }
            return
        }
        var index = 0
        for chunk in chunks {
            defer { index += chunk.members.count }
            guard !known.sortedContains(chunk.part.digest) else { continue }
            output[chunk.part.digest] = chunk.part
            for child in children[index ..< index + chunk.members.count] { child.newParts(excluding: known, into: &output) }
        }
    }

    /// FNV's low bits depend only on the low bits of the bytes: mixed (MurmurHash3's finalizer)
    /// before its bits decide boundaries.
    private static func mix(_ hash: UInt64) -> UInt64 {
        var hash = hash
        hash ^= hash >> 33
        hash = hash &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash = hash &* 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        return hash
    }

    private static func fnv(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}

/// JSON text of scalars, as `JSONEncoder` writes them (without escaping `/`).
enum JSONText {
    static func string(_ string: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        out.reserveCapacity(string.utf8.count + 2)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00 ..< 0x20:
                let digits = Array("0123456789abcdef".utf8)
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
        return out
    }

    static func number<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T, codingPath: [any CodingKey]) throws -> [UInt8] {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "JSON has no representation of \(value)"))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return Array(text.utf8)
    }
}
