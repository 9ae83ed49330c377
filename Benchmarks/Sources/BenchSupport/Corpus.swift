import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A deterministic corpus of files, like a project directory a user would store: prose, source
/// code, incompressible binaries, and exact duplicates of some of them.
///
/// Byte shares: 32% text, 24% source-like, 24% random binary (the 80% unique), and 20% exact copies
/// of earlier files placed elsewhere in the tree. The same seed and size always give the same bytes.
public struct Corpus: Sendable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case text, source, binary, duplicate
    }

    public struct File: Sendable {
        /// Path relative to the corpus root.
        public var path: String
        public var size: Int
        public var kind: Kind
        /// For a duplicate, the index of the file it copies.
        public var original: Int?
    }

    public var root: String
    public var files: [File]

    public var totalBytes: Int { files.reduce(0) { $0 + $1.size } }
    /// Bytes of the files that are not copies of another.
    public var uniqueBytes: Int { files.reduce(0) { $0 + ($1.original == nil ? $1.size : 0) } }
    public func bytes(of kind: Kind) -> Int { files.reduce(0) { $0 + ($1.kind == kind ? $1.size : 0) } }
    public func absolutePath(_ index: Int) -> String { root + "/" + files[index].path }

    /// Reads every file as an ingest does (`open`, `pread` into one reused buffer, `close`) and
    /// returns the calling thread's CPU seconds for it. Also what brings the files back into the
    /// page cache: this machine reclaims page-cache pages left idle for about half a minute, so a
    /// corpus read a round earlier is partly on disk again.
    public func readEveryFile() throws -> Double {
        var buffer = [UInt8](repeating: 0, count: files.map(\.size).max() ?? 0)
        let start = threadCPUSeconds()
        for index in files.indices {
            let path = absolutePath(index)
            let fd = try POSIX.open(path, O_RDONLY)
            defer { close(fd) }
            _ = try buffer.withUnsafeMutableBytes { try POSIX.readAll(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<files[index].size]), path: path) }
        }
        return threadCPUSeconds() - start
    }

    /// Writes the corpus under `root` (which must be empty or missing) and syncs it, so later timed
    /// writes do not compete with its write-back.
    public static func generate(at root: String, totalBytes: Int, seed: UInt64 = 0xC0FFEE) throws -> Corpus {
        var random = DeterministicRandom(seed: seed)
        let shares: [(Kind, Double, ClosedRange<Int>)] = [
            (.text, 0.32, 2 << 10 ... 512 << 10),
            (.source, 0.24, 1 << 10 ... 128 << 10),
            (.binary, 0.24, 64 << 10 ... 4 << 20),
        ]
        // Plan the unique files: kinds drawn in proportion to their remaining byte quota.
        var remaining = shares.map { Int(Double(totalBytes) * $0.1) }
        var files: [File] = []
        var counters: [Kind: Int] = [:]
        while remaining.contains(where: { $0 > 0 }) {
            let open = remaining.indices.filter { remaining[$0] > 0 }
            let weights = open.map { Double(remaining[$0]) }
            var pick = random.unit() * weights.reduce(0, +)
            var choice = open.last!
            for (i, w) in zip(open, weights) {
                if pick < w { choice = i; break }
                pick -= w
            }
            let (kind, _, sizes) = shares[choice]
            let size = min(random.logUniform(sizes), max(remaining[choice], sizes.lowerBound))
            remaining[choice] -= size
            let n = counters[kind, default: 0]
            counters[kind] = n + 1
            files.append(File(path: "\(kind.rawValue)/d\(n % 32)/\(kind.rawValue)-\(n).\(extensionFor(kind))", size: size, kind: kind))
        }
        // Duplicates: copies of earlier files until they make up 20% of all bytes. They come after
        // the originals, as a second directory tree holding copies would in a walk.
        let uniqueCount = files.count
        var duplicateBytes = Int(Double(totalBytes) * 0.20)
        var copies = 0
        while duplicateBytes > 0 {
            let original = random.below(uniqueCount)
            let source = files[original]
            if source.size > duplicateBytes * 2 && source.size > 256 << 10 { continue }  // keep the share near 20%
            duplicateBytes -= source.size
            let name = (source.path as NSString).lastPathComponent
            files.append(File(path: "copies/d\(copies % 16)/\(copies)-\(name)", size: source.size, kind: .duplicate, original: original))
            copies += 1
        }
        let corpus = Corpus(root: root, files: files)
        try corpus.write(seed: seed)
        return corpus
    }

    private static func extensionFor(_ kind: Kind) -> String {
        switch kind {
        case .text: "txt"
        case .source: "swift"
        case .binary: "bin"
        case .duplicate: "dup"
        }
    }

    private func write(seed: UInt64) throws {
        var generator = ContentGenerator(seed: seed ^ 0x5EED)
        var directories = Set<String>()
        var buffer: [UInt8] = []
        for (index, file) in files.enumerated() {
            let path = absolutePath(index)
            let directory = (path as NSString).deletingLastPathComponent
            if directories.insert(directory).inserted { try POSIX.makeDirectory(directory) }
            if let original = file.original {
                guard let bytes = try POSIX.readFile(absolutePath(original)) else {
                    throw SystemCallError(call: "open", path: absolutePath(original), code: ENOENT)
                }
                try bytes.withUnsafeBytes { try POSIX.writeFile(path, $0, sync: false) }
                continue
            }
            buffer.removeAll(keepingCapacity: true)
            generator.generate(file.kind, size: file.size, into: &buffer)
            try buffer.withUnsafeBytes { try POSIX.writeFile(path, $0, sync: false) }
        }
        sync()
    }
}

/// Generates file contents of each kind. Text is English-like (Zipf-distributed words from a made-up
/// vocabulary, sentences, paragraphs: zstd -3 compresses it about 3x); source is code-like
/// (indentation, keywords, identifiers, literals: about 4-6x); binary is random (incompressible).
public struct ContentGenerator {
    private var random: DeterministicRandom
    private let words: [[UInt8]]
    private let identifiers: [[UInt8]]
    private let keywords: [[UInt8]] = ["let", "var", "func", "return", "if", "guard", "else", "for", "in", "while",
                                       "struct", "final class", "enum", "case", "switch", "try", "throw", "import",
                                       "public", "private", "static", "self", "nil", "true", "false"].map { Array($0.utf8) }

    public init(seed: UInt64) {
        var random = DeterministicRandom(seed: seed)
        let syllables = ["ka", "lo", "mi", "ren", "sta", "ver", "to", "en", "qu", "ar", "is", "ion", "the", "de", "or",
                         "al", "an", "pro", "con", "tra", "men", "ti", "ble", "ous", "ing", "er", "at", "un", "re", "com"]
        var vocabulary = Set<String>()
        var wordList: [[UInt8]] = []
        while wordList.count < 4096 {
            let parts = 1 + random.below(4)
            var word = ""
            for _ in 0 ..< parts { word += syllables[random.below(syllables.count)] }
            if vocabulary.insert(word).inserted { wordList.append(Array(word.utf8)) }
        }
        // Common words first: the Zipf draw below favours low indices.
        wordList.sort { $0.count < $1.count }
        words = wordList
        self.random = random
        identifiers = (0 ..< 600).map { i in
            let a = wordList[i * 3 % 2048], b = wordList[(i * 7 + 11) % 4096]
            var id = a
            id.append(contentsOf: [b[0] & 0xDF] + b.dropFirst())
            return id
        }
    }

    public mutating func generate(_ kind: Corpus.Kind, size: Int, into buffer: inout [UInt8]) {
        buffer.reserveCapacity(size + 256)
        switch kind {
        case .text: text(size: size, into: &buffer)
        case .source: source(size: size, into: &buffer)
        case .binary, .duplicate:
            buffer = [UInt8](unsafeUninitializedCapacity: size) { storage, count in
                random.fill(UnsafeMutableRawBufferPointer(storage))
                count = size
            }
        }
        if buffer.count > size { buffer.removeSubrange(size...) }
    }

    /// Words in `0 ..< count`, Zipf-like: index = count * u^3.
    @inline(__always)
    private mutating func zipf(_ count: Int) -> Int {
        let u = random.unit()
        return min(count - 1, Int(Double(count) * u * u * u))
    }

    private mutating func text(size: Int, into buffer: inout [UInt8]) {
        var sentenceStart = true
        var wordsInSentence = 0
        var sentencesInParagraph = 0
        while buffer.count < size {
            var word = words[zipf(words.count)]
            if sentenceStart { word[0] &= 0xDF; sentenceStart = false }
            buffer.append(contentsOf: word)
            wordsInSentence += 1
            if wordsInSentence > 4 && random.below(12) == 0 {
                buffer.append(UInt8(ascii: "."))
                wordsInSentence = 0
                sentenceStart = true
                sentencesInParagraph += 1
                if sentencesInParagraph > 3 && random.below(5) == 0 {
                    buffer.append(contentsOf: [10, 10])
                    sentencesInParagraph = 0
                } else {
                    buffer.append(32)
                }
            } else if random.below(14) == 0 {
                buffer.append(contentsOf: [UInt8(ascii: ","), 32])
            } else {
                buffer.append(32)
            }
        }
    }

    private mutating func source(size: Int, into buffer: inout [UInt8]) {
        var depth = 0
        while buffer.count < size {
            let indent = depth * 4
            buffer.append(contentsOf: repeatElement(32, count: indent))
            switch random.below(10) {
            case 0 where depth < 4:
                buffer.append(contentsOf: keywords[random.below(6) + 1])
                buffer.append(32)
                buffer.append(contentsOf: identifiers[zipf(identifiers.count)])
                buffer.append(contentsOf: Array("(_ value: Int) -> Int {".utf8))
                depth += 1
            case 1 where depth > 0:
                buffer.append(UInt8(ascii: "}"))
                depth -= 1
            case 2:
                buffer.append(contentsOf: Array("// ".utf8))
                for _ in 0 ..< 3 + random.below(8) {
                    buffer.append(contentsOf: words[zipf(words.count)])
                    buffer.append(32)
                }
            default:
                buffer.append(contentsOf: keywords[zipf(keywords.count)])
                buffer.append(32)
                buffer.append(contentsOf: identifiers[zipf(identifiers.count)])
                buffer.append(contentsOf: Array(" = ".utf8))
                buffer.append(contentsOf: identifiers[zipf(identifiers.count)])
                buffer.append(UInt8(ascii: "."))
                buffer.append(contentsOf: identifiers[zipf(identifiers.count)])
                buffer.append(UInt8(ascii: "("))
                buffer.append(contentsOf: Array(String(random.below(10_000)).utf8))
                buffer.append(UInt8(ascii: ")"))
            }
            buffer.append(10)
        }
    }

    /// A block of text-like bytes (for point-read and small-blob workloads), unique per call.
    public mutating func textBlock(size: Int) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(size + 64)
        // A random prefix makes every block distinct (so nothing dedups by accident).
        var prefix = [UInt8](repeating: 0, count: 16)
        prefix.withUnsafeMutableBytes { random.fill($0) }
        buffer.append(contentsOf: prefix.map { 0x61 + $0 % 26 })
        text(size: size, into: &buffer)
        buffer.removeSubrange(size...)
        return buffer
    }
}
