import Foundation
import Synchronization
@testable import ContentStore

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

extension Store.Configuration {
    /// Fast settings for tests that do not examine durability.
    static func testing(durability: Store.Durability = .none, clock: TestClock? = nil) -> Self {
        var configuration = Store.Configuration()
        configuration.durability = durability
        if let clock { configuration.now = { clock.now } }
        return configuration
    }
}

/// Reads a store's state through the public API, for comparing against a model.
func allRecords(_ store: Store) throws -> [String: Record] {
    var result: [String: Record] = [:]
    for key in try store.keys(withPrefix: "") { result[key] = try store.record(forKey: key) }
    return result
}

/// Copies a directory tree (a store) so a test can damage the copy.
/// An open store's control socket is skipped: it is a live endpoint, not data, and cannot be copied.
func copyDirectory(_ source: URL, to destination: URL) throws {
    let manager = FileManager.default
    try? manager.removeItem(at: destination)
    try manager.createDirectory(at: destination, withIntermediateDirectories: true)
    for name in try manager.contentsOfDirectory(atPath: source.path) {
        let from = source.appendingPathComponent(name)
        let to = destination.appendingPathComponent(name)
        switch try manager.attributesOfItem(atPath: from.path)[.type] as? FileAttributeType {
        case .typeDirectory?: try copyDirectory(from, to: to)
        case .typeSocket?: continue
        default: try manager.copyItem(at: from, to: to)
        }
    }
}

/// Flips one bit of a file in place.
func flipBit(in file: URL, at offset: Int, bit: UInt8 = 0) throws {
    var bytes = try Data(contentsOf: file)
    bytes[offset] ^= 1 << bit
    try bytes.write(to: file)
}

func files(in directory: URL, withExtension ext: String) throws -> [URL] {
    try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        .filter { $0.pathExtension == ext }
        .sorted { $0.lastPathComponent < $1.lastPathComponent }
}

extension StoreError {
    /// For `#expect(throws:)`: matches any error with this code.
    static func code(_ code: Code) -> StoreError { StoreError(code: code, message: "") }
}
