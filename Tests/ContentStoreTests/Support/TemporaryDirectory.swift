import Foundation

/// A fresh directory under the system's temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("cs-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}
