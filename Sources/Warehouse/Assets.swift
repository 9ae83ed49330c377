import ContentStore
import Foundation

enum AssetName {
    /// Asset names are non-empty relative paths of `/`-separated UTF-8 components, none of them
    /// empty, `.` or `..`, and without NUL. (A Swift `String` is always valid UTF-8.)
    static func validate(_ name: String, projectID: UUID) throws {
        if let problem = problem(with: name) {
            throw WarehouseError.invalidArgument("asset name \"\(describe(name))\" in project \(projectID.uuidString) \(problem)")
        }
    }

    static func problem(with name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.utf8.contains(0) { return "contains NUL" }
        if name.hasPrefix("/") { return "is an absolute path" }
        for component in name.split(separator: "/", omittingEmptySubsequences: false) {
            switch component {
            case "": return "has an empty path component"
            case ".", "..": return "has a \"\(component)\" path component"
            default: continue
            }
        }
        return nil
    }

    static func describe(_ name: String) -> String {
        let shown = name.count > 80 ? String(name.prefix(80)) + "…" : name
        return shown.unicodeScalars.map { $0.value < 0x20 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined()
    }
}

/// Where one asset's bytes come from.
enum AssetSource: Sendable {
    case data(Data)
    case file(URL)

    func put(into store: Store) throws -> Digest {
        switch self {
        case let .data(data): return try store.put(data)
        case let .file(url): return try store.put(contentsOf: url)
        }
    }
}

/// A step to add, with its assets gathered (directories listed) but nothing stored yet.
struct GatheredStep: Sendable {
    var userData: Data
    var assets: [String: AssetSource]
}

enum AssetDirectory {
    /// The regular files under `root`, recursively, by their `/`-separated paths relative to it.
    /// Symbolic links (other than `root` itself) and special files are skipped.
    ///
    /// - Throws: a `CocoaError`/`StoreError` when `root` is not a readable directory or a
    ///   subdirectory cannot be listed.
    static func files(under root: URL) throws -> [String: URL] {
        guard root.isFileURL else {
            throw StoreError(code: .invalidArgument, message: "the assets source \(root) is not a file URL")
        }
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: root.path, isDirectory: &isDirectory) else {
            throw StoreError(code: .notFound, message: "the assets source \(root.path) does not exist", path: root.path)
        }
        guard isDirectory.boolValue else {
            throw StoreError(code: .invalidArgument, message: "the assets source \(root.path) is not a directory", path: root.path)
        }
        var files: [String: URL] = [:]
        try collect(directory: root, relative: "", into: &files, manager: manager)
        return files
    }

    private static func collect(directory: URL, relative: String, into files: inout [String: URL], manager: FileManager) throws {
        let entries = try manager.contentsOfDirectory(atPath: directory.path)
        for entry in entries.sorted() {
            let url = directory.appendingPathComponent(entry)
            let name = relative.isEmpty ? entry : relative + "/" + entry
            let type = try manager.attributesOfItem(atPath: url.path)[.type] as? FileAttributeType
            switch type {
            case .typeRegular?:
                guard files[name] == nil else {
                    // Swift compares strings by canonical equivalence; two such names would collide.
                    throw StoreError(code: .invalidArgument, message: "two files under \(directory.path) have canonically equivalent names \"\(AssetName.describe(name))\"")
                }
                files[name] = url
            case .typeDirectory?:
                try collect(directory: url, relative: name, into: &files, manager: manager)
            default:
                continue
            }
        }
    }
}
