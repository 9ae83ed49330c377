import Foundation

/// A fresh directory for tests whose durability is simulated (``PowerCutFileIO``), removed when the
/// test ends. It lives in `/dev/shm` when there is one: those tests create and delete thousands of
/// small stores, which a disk mounted with `discard` makes several times slower, and nothing in them
/// depends on the real disk.
final class ScratchDirectory {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        var isDirectory: ObjCBool = false
        let shm = FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            && FileManager.default.isWritableFile(atPath: "/dev/shm")
        let base = shm ? URL(fileURLWithPath: "/dev/shm", isDirectory: true) : FileManager.default.temporaryDirectory
        url = base.appendingPathComponent("cs-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}
