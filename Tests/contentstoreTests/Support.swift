import ContentStore
import Foundation
import Testing
@testable import ContentStore

/// A fresh directory under the system's temporary directory, removed when the test ends.
final class ScratchDirectory {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("cs-cli-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// ContentStore's SplitMix64, so failures reproduce from the seed.
typealias TestRandom = SplitMix64

extension SplitMix64 {
    mutating func bytes(_ count: Int) -> Data {
        Data((0 ..< count).map { _ in UInt8(truncatingIfNeeded: next()) })
    }
}

/// A small store: `count` referenced blobs (records `k0`, `k1`, ...) and `garbage` unreferenced ones, closed.
@discardableResult
func makeStore(at url: URL, count: Int = 8, garbage: Int = 0, size: Int = 3000, packSize: UInt64? = nil) throws -> [String: (Digest, Data)] {
    var configuration = Store.Configuration()
    if let packSize { configuration.packSizeTarget = packSize }
    let store = try Store(at: url, configuration: configuration)
    var random = TestRandom(seed: 9)
    var made: [String: (Digest, Data)] = [:]
    for index in 0 ..< count {
        let data = random.bytes(size)
        let digest = try store.put(data)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: "k\(index)") }
        made["k\(index)"] = (digest, data)
        if index < garbage { _ = try store.put(random.bytes(size)) }
    }
    try store.close()
    return made
}

/// Where an indexed blob lives (opens and closes the store).
func location(of digest: Digest, in url: URL) throws -> (path: String, offset: UInt64) {
    let store = try Store(at: url)
    defer { try? store.close() }
    let entry = try #require(store.core.withLock { $0.state.blobs[digest] })
    return (store.packs.path(of: entry.location.pack), entry.location.offset)
}

/// Flips the lowest bit of one byte of a file.
func flipBit(_ path: String, at offset: UInt64) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: offset)
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: offset)
    try handle.write(contentsOf: [byte ^ 1])
}
