import ContentStore
import Foundation

/// ContentStore's SplitMix64: the same sequence everywhere, so the demo's corpus is the same on every run.
typealias DemoRandom = SplitMix64

extension SplitMix64 {
    /// A size between `lower` and `upper`, spread evenly on a log scale (many small, some large).
    mutating func logUniform(_ lower: Int, _ upper: Int) -> Int {
        let low = log(Double(lower)), high = log(Double(upper))
        return Int(exp(low + (high - low) * Double(next() >> 11) / Double(1 << 53)))
    }
}

/// The files the demo stores: text that compresses well, random bytes that do not, and exact
/// duplicates of both under other names.
struct DemoCorpus {
    enum Kind: String { case text, binary, duplicate }

    struct File {
        var name: String
        var kind: Kind
        var data: Data
    }

    private(set) var files: [File] = []

    var totalBytes: UInt64 { files.reduce(0) { $0 + UInt64($1.data.count) } }
    func count(_ kind: Kind) -> Int { files.filter { $0.kind == kind }.count }

    init(seed: UInt64, scale: Double) {
        var random = DemoRandom(seed: seed)
        let texts = max(4, Int(240 * scale)), binaries = max(2, Int(40 * scale)), duplicates = max(2, Int(60 * scale))
        for index in 0 ..< texts {
            files.append(File(name: "notes/\(index).txt", kind: .text, data: Self.text(random.logUniform(4 << 10, 256 << 10), &random)))
        }
        for index in 0 ..< binaries {
            files.append(File(name: "media/\(index).bin", kind: .binary, data: Self.binary(random.logUniform(64 << 10, 1 << 20), &random)))
        }
        let originals = files.count
        for index in 0 ..< duplicates {
            let original = files[Int(random.next() % UInt64(originals))]
            files.append(File(name: "copies/\(index)-of-\(original.name.replacingOccurrences(of: "/", with: "-"))", kind: .duplicate, data: original.data))
        }
    }

    private static let vocabulary: [[UInt8]] = """
        the of and to in a is that for it as was with be by on not he this are or his from at which but have an \
        they you were her she there been one all we their has would when if so no will can more out up into do any \
        store blob record commit digest pack log checkpoint snapshot reference count garbage collection grace period \
        durable atomic transaction write read verify compress deduplicate replay recover crash segment index offset \
        project step asset archive version document key value metadata user data undo redo cursor bundle
        """.split(separator: " ").map { Array($0.utf8) }

    /// Sentences of common words, skewed like real text so that zstd finds repetition.
    private static func text(_ size: Int, _ random: inout DemoRandom) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size + 32)
        var wordsInSentence = 0
        while bytes.count < size {
            // Squaring a uniform draw favours the first (commonest) words.
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            let word = vocabulary[Int(draw * draw * Double(vocabulary.count))]
            if wordsInSentence == 0, let first = word.first, first >= 0x61 {
                bytes.append(first - 0x20)
                bytes.append(contentsOf: word.dropFirst())
            } else {
                bytes.append(contentsOf: word)
            }
            wordsInSentence += 1
            if wordsInSentence > 6 && random.next() % 8 == 0 {
                bytes.append(contentsOf: random.next() % 5 == 0 ? Array(".\n\n".utf8) : Array(". ".utf8))
                wordsInSentence = 0
            } else {
                bytes.append(0x20)
            }
        }
        return Data(bytes.prefix(size))
    }

    private static func binary(_ size: Int, _ random: inout DemoRandom) -> Data {
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < size {
                var word = random.next()
                let n = min(8, size - offset)
                withUnsafeBytes(of: &word) { raw.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: n) }
                offset += n
            }
        }
        return Data(bytes)
    }
}
