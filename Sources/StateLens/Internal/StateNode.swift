import ContentStore
import Foundation
import Synchronization

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
/// `@unchecked Sendable`: every stored property is a `let` set in `init` (the fingerprint's cache
/// is atomic); `source` holds a value of the `Sendable` root state (or a part of one), kept only to
/// be compared with `==`.
final class StateNode: @unchecked Sendable {
    enum Kind {
        case scalar
        /// Keys ascending by UTF-8 bytes, each with its value's node.
        case object(keys: [String], children: [StateNode])
        /// A small array's elements, in order.
        case array([StateNode])
        /// A large array: its elements are the members of its ``StateNode/chunks``, which are
        /// shared with the versions it was built from (so an update of one element neither walks
        /// nor frees the others).
        case chunkedArray
    }

    /// A chunk of a large container: its members, and the part storing them. A class: a chunk an
    /// update did not change is the same object in the next version's node.
    final class Chunk: Sendable {
        let members: [StateNode]
        let part: Part
        /// Every part the members' expansion needs (not the chunk's own).
        let memberParts: [Digest]

        init(members: [StateNode], part: Part, memberParts: [Digest]) {
            self.members = members
            self.part = part
            self.memberParts = memberParts
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
    /// The digests of `chunks`' parts, in the same order: kept beside the chunks so that an update
    /// reads a large container's references from one array, not from a hundred chunk objects last
    /// touched by the update before.
    let chunkDigests: [Digest]
    /// How many members the chunks up to each one hold (index after its last member).
    let chunkEnds: [Int]
    /// The chunks this node's cut made, as opposed to those it took whole from the node it was
    /// built from (all of them for a node built without one): only these can hold parts the
    /// version it was built from lacks (``newParts(excluding:reusedAreKnown:into:)``).
    let freshChunks: Range<Int>
    /// The bytes of a container's member texts (an object's with their keys), separators excluded:
    /// what decides whether it is cut into chunks.
    let memberBytes: Int
    /// Every part the fragment's expansion needs, this subtree's own and its descendants'. A large
    /// container's are ascending (duplicates kept), so a parent holding only it passes them on sorted.
    let parts: [Digest]
    /// A hash of the fragment, for chunk boundaries: computed when a cut first asks for it, then
    /// kept. Most large fragments are never asked (a state's root, the node of a large array
    /// that is a member of a small object), and hashing them byte by byte on every update was
    /// a cost that grew with the state (Docs/statelens.md, "Speed").
    var fingerprint: UInt64 {
        if fingerprintKnown.load(ordering: .acquiring) { return fingerprintValue.load(ordering: .relaxed) }
        let value = StateNode.fnv(fragment[...])
        // Two threads may both compute it: they store the same value.
        fingerprintValue.store(value, ordering: .relaxed)
        fingerprintKnown.store(true, ordering: .releasing)
        return value
    }
    private let fingerprintValue = Atomic<UInt64>(0)
    private let fingerprintKnown = Atomic<Bool>(false)

    private init(kind: Kind, source: Any?, fragment: [UInt8], ownPart: Part? = nil, chunks: [Chunk] = [], chunkDigests: [Digest] = [],
                 chunkEnds: [Int] = [], freshChunks: Range<Int>? = nil, memberBytes: Int = 0, parts: [Digest]) {
        self.kind = kind
        self.source = source
        self.fragment = fragment
        self.ownPart = ownPart
        self.chunks = chunks
        self.chunkDigests = chunkDigests
        self.freshChunks = freshChunks ?? chunks.indices
        self.chunkEnds = chunkEnds
        self.memberBytes = memberBytes
        self.parts = parts
    }

    /// A string, number, boolean or null, as its JSON text.
    static func scalar(_ json: [UInt8], source: Any?) -> StateNode {
        guard json.count > PartFormat.partSize else {
            return StateNode(kind: .scalar, source: source, fragment: json, parts: [])
        }
        let part = Part(digest: Digest.sha256(json), bytes: json)
        var fragment: [UInt8] = []
        PartFormat.appendReference(part.digest, to: &fragment)
        return StateNode(kind: .scalar, source: source, fragment: fragment, ownPart: part, parts: [part.digest])
    }

    /// An object; `members` need not be sorted. `previous` is the node this one replaces, whose
    /// chunks are reused where they hold the same members.
    static func object(_ members: [(key: String, node: StateNode)], source: Any?, previous: StateNode?) -> StateNode {
        let sorted = sortedByKey(members)
        let keys = sorted.map(\.key)
        let children = sorted.map(\.node)
        let kind = Kind.object(keys: keys, children: children)
        let memberBytes = sorted.reduce(0) { $0 + JSONText.stringLength($1.key) + 1 + $1.node.fragment.count }
        guard isLarge(memberBytes: memberBytes, count: children.count) else {
            // Written straight into the fragment: an update builds a small object for each level of
            // the path to its change, and a text per member cost an array and a copy each.
            var fragment: [UInt8] = [UInt8(ascii: "{")]
            fragment.reserveCapacity(memberBytes + sorted.count + 1)
            for (index, member) in sorted.enumerated() {
                if index > 0 { fragment.append(UInt8(ascii: ",")) }
                JSONText.appendString(member.key, to: &fragment)
                fragment.append(UInt8(ascii: ":"))
                fragment.append(contentsOf: member.node.fragment)
            }
            fragment.append(UInt8(ascii: "}"))
            return StateNode(kind: kind, source: source, fragment: fragment, memberBytes: memberBytes, parts: children.flatMap(\.parts))
        }
        let texts = sorted.map { member -> [UInt8] in
            var text = JSONText.string(member.key)
            text.append(UInt8(ascii: ":"))
            text.append(contentsOf: member.node.fragment)
            return text
        }
        var reusable: StateNode?
        var (prefix, suffix) = (0, 0)
        if let previous, case let .object(oldKeys, oldChildren) = previous.kind, !previous.chunks.isEmpty {
            reusable = previous
            (prefix, suffix) = commonEnds(oldCount: oldKeys.count, count: keys.count) { old, new in
                oldChildren[old] === children[new] && oldKeys[old] == keys[new]
            }
        }
        let cut = chunked(count: children.count, prefix: prefix, suffix: suffix, previous: reusable) { index in
            (children[index], texts[index], StateNode.fnv(Array(keys[index].utf8)[...]) ^ children[index].fingerprint)
        }
        return chunkedContainer(kind: kind, brackets: "{}", cut: cut, previous: reusable, memberBytes: memberBytes, source: source)
    }

    /// `members` in key order (UTF-8 bytes). A struct's few members go through an insertion sort:
    /// the general sort's setup costs more than the sort itself for the handful of keys most
    /// objects have, and an update encodes one object per level of the path it changed.
    private static func sortedByKey(_ members: [(key: String, node: StateNode)]) -> [(key: String, node: StateNode)] {
        func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        guard members.count <= 16 else { return members.sorted { precedes($0.key, $1.key) } }
        var sorted = members
        for index in sorted.indices.dropFirst() {
            var place = index
            while place > 0, precedes(members[index].key, sorted[place - 1].key) {
                sorted[place] = sorted[place - 1]
                place -= 1
            }
            sorted[place] = members[index]
        }
        return sorted
    }

    /// An array, in order. `previous`'s chunks are reused where they hold the same element nodes
    /// at the start or the end.
    static func array(_ elements: [StateNode], source: Any?, previous: StateNode?) -> StateNode {
        let old = previous?.elements ?? []
        let (prefix, suffix) = commonEnds(oldCount: old.count, count: elements.count) { old[$0] === elements[$1] }
        return array(splicing: Array(elements[prefix ..< elements.count - suffix]), prefix: prefix, suffix: suffix, of: previous, source: source)
    }

    /// An array of `previous`'s first `prefix` elements, then `middle`, then `previous`'s last
    /// `suffix` elements (`prefix + suffix` at most `previous`'s count). A large array's unchanged
    /// chunks are taken as they are: the cost follows `middle` and the number of chunks, not the
    /// array's length.
    static func array(splicing middle: [StateNode], prefix: Int, suffix: Int, of previous: StateNode?, source: Any?) -> StateNode {
        let oldCount = previous?.elementCount ?? 0
        let count = prefix + middle.count + suffix
        func element(_ index: Int) -> StateNode {
            if index >= prefix, index < prefix + middle.count { return middle[index - prefix] }
            // Outside the middle: `previous` holds the element (prefix + suffix ≤ its count).
            return previous!.child(at: index < prefix ? index : index - count + oldCount)!
        }
        var memberBytes = middle.reduce(0) { $0 + $1.fragment.count }
        if let previous, prefix + suffix > 0 {
            memberBytes += previous.memberBytes
            for index in prefix ..< oldCount - suffix { memberBytes -= previous.child(at: index)!.fragment.count }
        }
        guard isLarge(memberBytes: memberBytes, count: count) else {
            let elements = (0 ..< count).map(element)
            return inline(kind: .array(elements), brackets: "[]", texts: elements.map(\.fragment), parts: elements.flatMap(\.parts),
                          memberBytes: memberBytes, source: source)
        }
        let reusable = previous.flatMap { $0.isChunkedArray ? $0 : nil }
        let cut = chunked(count: count, prefix: reusable == nil ? 0 : prefix, suffix: reusable == nil ? 0 : suffix, previous: reusable) { index in
            let node = element(index)
            return (node, node.fragment, node.fingerprint)
        }
        return chunkedContainer(kind: .chunkedArray, brackets: "[]", cut: cut, previous: reusable, memberBytes: memberBytes, source: source)
    }

    /// Whether a container of `count` members whose texts add up to `memberBytes` is cut into chunks.
    private static func isLarge(memberBytes: Int, count: Int) -> Bool {
        memberBytes + 2 + max(0, count - 1) > PartFormat.partSize
    }

    /// A container whose members' texts are inline in its fragment.
    private static func inline(kind: Kind, brackets: StaticString, texts: [[UInt8]], parts: [Digest], memberBytes: Int, source: Any?) -> StateNode {
        let (open, close) = brackets.withUTF8Buffer { ($0[0], $0[1]) }
        var fragment: [UInt8] = [open]
        fragment.reserveCapacity(memberBytes + texts.count + 1)
        for (index, text) in texts.enumerated() {
            if index > 0 { fragment.append(UInt8(ascii: ",")) }
            fragment.append(contentsOf: text)
        }
        fragment.append(close)
        return StateNode(kind: kind, source: source, fragment: fragment, memberBytes: memberBytes, parts: parts)
    }

    /// A container whose fragment is its brackets around its chunks' references. The references
    /// and parts of the chunks `cut` took from `previous` are copied from `previous`'s fragment and
    /// digests, and its sorted parts are edited by the chunks that changed, when no chunk holds
    /// parts of its own (no member larger than a part): so an update does not visit the unchanged
    /// chunks, nor sort the parts again.
    private static func chunkedContainer(kind: Kind, brackets: StaticString, cut: Cut, previous: StateNode?, memberBytes: Int, source: Any?) -> StateNode {
        let chunks = cut.chunks
        let fresh = cut.reusedHead ..< chunks.count - cut.reusedTail
        var digests: [Digest] = []
        digests.reserveCapacity(chunks.count)
        let (open, close) = brackets.withUTF8Buffer { ($0[0], $0[1]) }
        var fragment: [UInt8] = [open]
        fragment.reserveCapacity(chunks.count * (PartFormat.referenceSize + 1) + 1)
        // A reference and its separator take `stride` bytes of a chunked fragment, after the bracket.
        let stride = PartFormat.referenceSize + 1
        func appendReferences(ofPrevious range: Range<Int>) {
            guard let previous, !range.isEmpty else { return }
            if fragment.count > 1 { fragment.append(UInt8(ascii: ",")) }
            fragment.append(contentsOf: previous.fragment[(1 + range.lowerBound * stride) ..< (range.upperBound * stride)])
            digests.append(contentsOf: previous.chunkDigests[range])
        }
        let oldCount = previous?.chunks.count ?? 0
        appendReferences(ofPrevious: 0 ..< cut.reusedHead)
        for chunk in chunks[fresh] {
            if fragment.count > 1 { fragment.append(UInt8(ascii: ",")) }
            PartFormat.appendReference(chunk.part.digest, to: &fragment)
            digests.append(chunk.part.digest)
        }
        appendReferences(ofPrevious: (oldCount - cut.reusedTail) ..< oldCount)
        fragment.append(close)
        let ends = chunkEnds(of: cut, previous: previous)
        let parts: [Digest]
        if let previous, previous.parts.count == oldCount, chunks[fresh].allSatisfy({ $0.memberParts.isEmpty }) {
            var edited = previous.parts
            for digest in previous.chunkDigests[cut.reusedHead ..< oldCount - cut.reusedTail] {
                if let index = edited.sortedIndex(of: digest) { edited.remove(at: index) }
            }
            for digest in digests[fresh] { edited.insert(digest, at: edited.sortedInsertionIndex(of: digest)) }
            parts = edited
        } else {
            parts = (digests + chunks.flatMap(\.memberParts)).sorted()
        }
        return StateNode(kind: kind, source: source, fragment: fragment, chunks: chunks, chunkDigests: digests, chunkEnds: ends,
                         freshChunks: fresh, memberBytes: memberBytes, parts: parts)
    }

    /// ``chunkEnds`` of a container cut as `cut`: the chunks taken from `previous` keep their ends
    /// (moved by the members added or removed before them), so only the fresh chunks are counted.
    /// Counting every chunk read the member list of each of a large state's chunks, objects an
    /// update of one element otherwise never touches.
    private static func chunkEnds(of cut: Cut, previous: StateNode?) -> [Int] {
        var ends: [Int] = []
        ends.reserveCapacity(cut.chunks.count)
        let oldEnds = previous?.chunkEnds ?? []
        ends.append(contentsOf: oldEnds[..<cut.reusedHead])
        var end = ends.last ?? 0
        for chunk in cut.chunks[cut.reusedHead ..< cut.chunks.count - cut.reusedTail] {
            end += chunk.members.count
            ends.append(end)
        }
        guard cut.reusedTail > 0 else { return ends }
        // The tail's chunks end where they ended, moved by the difference in the members before them.
        let tailStart = oldEnds.count - cut.reusedTail
        let shift = end - (tailStart == 0 ? 0 : oldEnds[tailStart - 1])
        ends.append(contentsOf: oldEnds[tailStart...].lazy.map { $0 + shift })
        return ends
    }

    /// How many members at the start and, after those, at the end are the same (`same(old, new)`)
    /// in an old and a new list of members.
    static func commonEnds(oldCount: Int, count: Int, same: (_ old: Int, _ new: Int) -> Bool) -> (prefix: Int, suffix: Int) {
        let limit = min(oldCount, count)
        var prefix = 0
        while prefix < limit, same(prefix, prefix) { prefix += 1 }
        var suffix = 0
        while prefix + suffix < limit, same(oldCount - 1 - suffix, count - 1 - suffix) { suffix += 1 }
        return (prefix, suffix)
    }

    /// Cuts members `0 ..< count` into chunks (Docs/statelens.md, "Large states"). The first
    /// `prefix` and the last `suffix` members are the ones `previous` (a large container of the
    /// same kind) has at the same place from the same end: its chunks that end inside the prefix
    /// are taken whole, and once a new chunk ends inside the suffix where one of its chunks began,
    /// so are all its chunks from there. A boundary depends only on the members since the chunk's
    /// start, so cutting those members again would give the same chunks: the result is the one a
    /// cut from scratch gives. (The old last chunk ended with its container: it is cut again unless
    /// the suffix reaches it from a boundary.) An update of one element of a large array so costs a
    /// pointer per chunk, plus the members of the chunks it changed.
    private static func chunked(count: Int, prefix: Int, suffix: Int, previous: StateNode?,
                                member: (Int) -> (node: StateNode, text: [UInt8], fingerprint: UInt64)) -> Cut {
        var chunks: [Chunk] = []
        chunks.reserveCapacity((previous?.chunks.count ?? 0) + 2)
        var index = 0
        var reusedHead = 0
        let shift = count - (previous?.chunkEnds.last ?? 0)
        if let previous {
            let first = previous.chunkEnds.firstIndex { $0 > prefix } ?? previous.chunks.count - 1
            chunks.append(contentsOf: previous.chunks[..<first])
            reusedHead = first
            index = first == 0 ? 0 : previous.chunkEnds[first - 1]
        }
        var members: [StateNode] = []
        // No chunk but a container's last is shorter than this: its bytes are not moved as they grow to it.
        let minimumChunk = PartFormat.partSize / 4
        var bytes: [UInt8] = []
        var memberParts: [Digest] = []
        while index < count {
            let (node, text, fingerprint) = member(index)
            if members.isEmpty { bytes.reserveCapacity(minimumChunk) } else { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: text)
            members.append(node)
            memberParts.append(contentsOf: node.parts)
            index += 1
            // Each member's text and its separator.
            let size = bytes.count + 1
            let atBoundary = size >= minimumChunk && StateNode.mix(fingerprint) & PartFormat.boundaryMask == 0
            guard atBoundary || size >= PartFormat.partSize || index == count else { continue }
            chunks.append(Chunk(members: members, part: Part(digest: Digest.sha256(bytes), bytes: bytes), memberParts: memberParts))
            members = []
            bytes = []
            memberParts = []
            if let previous, index >= count - suffix, index < count, let next = previous.chunk(startingAt: index - shift) {
                chunks.append(contentsOf: previous.chunks[next...])
                return Cut(chunks: chunks, reusedHead: reusedHead, reusedTail: previous.chunks.count - next)
            }
        }
        return Cut(chunks: chunks, reusedHead: reusedHead, reusedTail: 0)
    }

    /// The chunks of a cut: the first `reusedHead` and the last `reusedTail` are the previous
    /// container's first and last chunks, taken as they are.
    private struct Cut {
        var chunks: [Chunk]
        var reusedHead: Int
        var reusedTail: Int
    }

    /// The index of the chunk whose first member is member `position`, if one is.
    private func chunk(startingAt position: Int) -> Int? {
        guard position > 0 else { return chunks.isEmpty ? nil : 0 }
        let found = chunkEnds.sortedIndex(of: position)
        return found.flatMap { $0 + 1 < chunks.count ? $0 + 1 : nil }
    }

    private var isChunkedArray: Bool {
        if case .chunkedArray = kind { return true }
        return false
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

    /// The number of elements of an array node; 0 for another kind.
    var elementCount: Int {
        switch kind {
        case let .array(elements): elements.count
        case .chunkedArray: chunkEnds.last ?? 0
        case .scalar, .object: 0
        }
    }

    /// The elements of an array node (gathered from the chunks of a large one); empty for another kind.
    var elements: [StateNode] {
        switch kind {
        case let .array(elements): elements
        case .chunkedArray: chunks.flatMap(\.members)
        case .scalar, .object: []
        }
    }

    /// The element at `index` of an array node.
    func child(at index: Int) -> StateNode? {
        switch kind {
        case let .array(elements):
            return elements.indices.contains(index) ? elements[index] : nil
        case .chunkedArray:
            guard index >= 0, index < elementCount else { return nil }
            var (low, high) = (0, chunkEnds.count - 1)
            while low < high {
                let middle = (low + high) / 2
                if chunkEnds[middle] <= index { low = middle + 1 } else { high = middle }
            }
            return chunks[low].members[index - (low == 0 ? 0 : chunkEnds[low - 1])]
        case .scalar, .object:
            return nil
        }
    }

    /// The parts of this subtree that are not in `known` (sorted ascending: the last version
    /// record's parts), to be put before the commit that refers to them. A known part's whole
    /// subtree is known: its bytes name its children's digests.
    ///
    /// `reusedAreKnown`: the caller vouches that every node this tree took from an older tree
    /// has its parts in `known` (the tree was built from the tree of the version whose record's
    /// parts `known` are, and that tree's parts are exactly those). A large container's chunks
    /// taken whole are then skipped without a look: only the chunks its cut made are searched,
    /// so an update of one element of a large array does not pass over every chunk's digest.
    func newParts(excluding known: [Digest], reusedAreKnown: Bool = false, into output: inout [Digest: Part]) {
        // Most nodes (every small member of a chunk) need no part: not one child is visited.
        guard !parts.isEmpty else { return }
        if let ownPart {
            if !known.sortedContains(ownPart.digest) { output[ownPart.digest] = ownPart }
            return
        }
        guard chunks.isEmpty else {
            if reusedAreKnown {
                for index in freshChunks {
                    let digest = chunkDigests[index]
                    guard output[digest] == nil, !known.sortedContains(digest) else { continue }
                    let chunk = chunks[index]
                    output[digest] = chunk.part
                    guard !chunk.memberParts.isEmpty else { continue }
                    for member in chunk.members { member.newParts(excluding: known, reusedAreKnown: true, into: &output) }
                }
                return
            }
            // `parts` and `known` are both ascending: one pass over the two finds the digests not
            // known, without visiting a known chunk's object. A part of a member is new only in a
            // new chunk (a known chunk's bytes name it), so it is reached through that chunk.
            var knownIndex = 0
            for digest in parts {
                while knownIndex < known.count, known[knownIndex] < digest { knownIndex += 1 }
                guard knownIndex == known.count || known[knownIndex] != digest, output[digest] == nil,
                      let index = chunkDigests.firstIndex(of: digest) else { continue }
                let chunk = chunks[index]
                output[digest] = chunk.part
                guard !chunk.memberParts.isEmpty else { continue }
                for member in chunk.members { member.newParts(excluding: known, into: &output) }
            }
            return
        }
        switch kind {
        case .scalar, .chunkedArray: return
        case let .object(_, children), let .array(children):
            for child in children { child.newParts(excluding: known, reusedAreKnown: reusedAreKnown, into: &output) }
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
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count + 2)
        appendString(string, to: &out)
        return out
    }

    /// Appends ``string(_:)``'s text to `out`.
    static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: their bytes are then copied at once, not appended one by one.
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: needsEscape) else { return false }
            out.append(contentsOf: bytes)
            return true
        } ?? false
        if !copied { appendEscaped(string, to: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// The length of ``string(_:)``'s text, without building it.
    static func stringLength(_ string: String) -> Int {
        string.utf8.reduce(2) { length, byte in
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09, 0x08, 0x0C: length + 2
            case 0x00 ..< 0x20: length + 6
            default: length + 1
            }
        }
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func appendEscaped(_ string: String, to out: inout [UInt8]) {
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
