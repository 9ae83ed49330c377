#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Directory-level system calls, each a thin wrapper naming its C call.
enum FileSystem {
    enum Kind { case missing, directory, other }

    /// `lstat(2)`, without following a final symlink (a symlink counts as `other`).
    static func kind(of path: String) -> Kind {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        return (info.st_mode & S_IFMT) == S_IFDIR ? .directory : .other
    }

    /// `mkdir(2)`; an existing directory is fine.
    static func createDirectory(_ path: String, mode: mode_t = 0o700) throws {
        if mkdir(path, mode) == 0 || (errno == EEXIST && kind(of: path) == .directory) { return }
        throw StoreError.io("cannot create directory", path: path, cause: SystemError("mkdir", errno: errno))
    }

    /// `opendir(3)`/`readdir(3)`: the names in a directory, without `.` and `..`.
    static func contents(of path: String) throws -> [String] {
        guard let dir = opendir(path) else {
            throw StoreError.io("cannot list directory", path: path, cause: SystemError("opendir", errno: errno))
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `rename(2)`: atomically replaces `destination`. Durable only after ``synchronizeDirectory(_:)``.
    static func rename(_ source: String, to destination: String) throws {
        guard Glibc.rename(source, destination) == 0 else {
            throw StoreError.io("cannot rename to \(destination)", path: source, cause: SystemError("rename", errno: errno))
        }
    }

    /// `unlink(2)`; a missing file is fine.
    static func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw StoreError.io("cannot remove", path: path, cause: SystemError("unlink", errno: errno))
        }
    }

    /// `open(2)` of the directory and `fsync(2)`, so entries created, renamed or removed in it are durable.
    static func synchronizeDirectory(_ path: String) throws {
        try File.open(path, flags: O_RDONLY | O_DIRECTORY).synchronize()
    }

    /// Writes a small file atomically: temporary file, `fsync`, `rename`, `fsync` of the directory.
    static func writeAtomically(_ bytes: [UInt8], to path: String, directory: String) throws {
        let temporary = path + ".tmp"
        let file = try File.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        try file.write(bytes, at: 0)
        try file.synchronize()
        try rename(temporary, to: path)
        try synchronizeDirectory(directory)
    }

    /// Reads a whole (small) file.
    static func readFile(_ path: String) throws -> [UInt8] {
        let file = try File.open(path, flags: O_RDONLY)
        return try file.readExactly(Int(try file.size()), at: 0)
    }
}
