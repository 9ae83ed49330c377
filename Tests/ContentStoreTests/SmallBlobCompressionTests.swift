import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// Small whole blobs are compressed with a longer shortest match (``LocalEngine/smallBlobMinimumMatch``)
/// so that their frames decode faster; larger ones with the level's own parameters. Either way the
/// pack holds an ordinary zstd frame.
@Suite(.blocking) struct SmallBlobCompressionTests {
    /// The frame `Zstd` makes of `bytes` at level 3, with `minimumMatch` when given.
    private func frame(_ bytes: Data, minimumMatch: Int?) throws -> [UInt8] {
        try bytes.withUnsafeBytes { source in
            var output = [UInt8](repeating: 0, count: source.count)
            let length = try #require(output.withUnsafeMutableBytes { Zstd.compress(source, into: $0, level: 3, minimumMatch: minimumMatch) })
            return Array(output[..<length])
        }
    }

    @Test(arguments: [4096, LocalEngine.smallBlobMaximumSize, LocalEngine.smallBlobMaximumSize + 1, 64 << 10])
    func aSmallBlobIsStoredAsAFrameWithLongerMatchesAndALargerOneAsTheLevelMakesIt(size: Int) throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var random = SeededRandom(seed: 11)
        let blob = random.compressibleBytes(size)
        let digest = try store.put(blob)
        let entry = try #require(store.core.withLock { $0.state.blobs[digest] })
        #expect(entry.isCompressed)

        let small = size <= LocalEngine.smallBlobMaximumSize
        let expected = try frame(blob, minimumMatch: small ? LocalEngine.smallBlobMinimumMatch : nil)
        let other = try frame(blob, minimumMatch: small ? nil : LocalEngine.smallBlobMinimumMatch)
        #expect(expected != other, "the two parameter sets make different frames of this blob")
        try store.packs.writeDeferred()  // a small put's bytes wait in memory until a reader needs them
        let pack = try Data(contentsOf: URL(fileURLWithPath: store.packs.path(of: entry.location.pack)))
        let start = Int(entry.location.offset) + PackFormat.entryHeaderSize
        let stored = Array(pack[start ..< start + Int(entry.storedLength)])
        #expect(stored == expected)

        // An ordinary frame: a plain one-shot decode gives the blob back, as does the store.
        var decoded = Data(count: size)
        try stored.withUnsafeBytes { frame in try decoded.withUnsafeMutableBytes { try Zstd.decompress(frame: frame, into: $0) } }
        #expect(decoded == blob)
        #expect(try store.get(digest) == blob)
        try store.close()
    }

    /// The shortest match is a sticky parameter of a pooled context: the next compression on the
    /// same context, without one, makes the frame a fresh context makes.
    @Test func aPooledContextIsHandedOnWithTheLevelsOwnParameters() throws {
        var random = SeededRandom(seed: 12)
        let blob = random.compressibleBytes(8192)
        let plain = try frame(blob, minimumMatch: nil)
        let longer = try frame(blob, minimumMatch: LocalEngine.smallBlobMinimumMatch)
        #expect(longer != plain)
        #expect(try frame(blob, minimumMatch: nil) == plain)
        let viaArray = try #require(blob.withUnsafeBytes { Zstd.compress($0, level: 3) })
        #expect(viaArray == plain)
    }
}
