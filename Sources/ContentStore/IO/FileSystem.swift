#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Path-level operations over a ``FileIO``, with failures as ``StoreError``s naming the path.
struct FileSystem: Sendable {
    let io: any FileIO

    /// `open(2)` with `O_CLOEXEC | O_NOFOLLOW` added, so a symlink planted in the store is refused.
    /// `followingSymlinks` is for the caller's own files (imports and exports), never the store's.
    func open(_ path: String, flags: Int32, mode: mode_t = 0o600, followingSymlinks: Bool = false) throws -> File {
        switch io.open(path, flags: flags | O_CLOEXEC | (followingSymlinks ? 0 : O_NOFOLLOW), mode: mode) {
        case .success(let descriptor): return File(descriptor: descriptor, path: path, io: io)
        case .failure(let error): throw StoreError.io("cannot open", path: path, cause: error)
        }
    }

    func kind(of path: String) -> FileKind { io.kind(of: path) }

    /// `mkdir(2)`; an existing directory is fine.
    func createDirectory(_ path: String, mode: mode_t = 0o700) throws {
        try io.mkdir(path, mode: mode).mapError { StoreError.io("cannot create directory", path: path, cause: $0) }.get()
    }

    /// The names in a directory, without `.` and `..`.
    func contents(of path: String) throws -> [String] {
        try io.contents(ofDirectory: path).mapError { StoreError.io("cannot list directory", path: path, cause: $0) }.get()
    }

    /// `rename(2)`: atomically replaces `destination`. Durable only after ``synchronizeDirectory(_:)``.
    func rename(_ source: String, to destination: String) throws {
        try io.rename(source, to: destination).mapError { StoreError.io("cannot rename to \(destination)", path: source, cause: $0) }.get()
    }

    /// `unlink(2)`; a missing file is fine.
    func remove(_ path: String) throws {
        try io.unlink(path).mapError { StoreError.io("cannot remove", path: path, cause: $0) }.get()
    }

    /// `fsync(2)` of a directory, so entries created, renamed or removed in it are durable.
    func synchronizeDirectory(_ path: String) throws {
        try open(path, flags: O_RDONLY | O_DIRECTORY).synchronize()
    }

    /// Writes a small file atomically: temporary file, `fsync`, `rename`, `fsync` of the directory.
    func writeAtomically(_ bytes: [UInt8], to path: String, directory: String) throws {
        let temporary = path + ".tmp"
        let file = try open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
        try file.write(bytes, at: 0)
        try file.synchronize()
        try rename(temporary, to: path)
        try synchronizeDirectory(directory)
    }

    /// Reads a whole file, refusing one over `maximumSize` before allocating: a sparse file claims
    /// any size on no disk space.
    func readFile(_ path: String, maximumSize: UInt64) throws -> [UInt8] {
        let file = try open(path, flags: O_RDONLY)
        let size = try file.size()
        guard size <= maximumSize else {
            throw StoreError.corrupted("file is \(size) bytes, over the \(maximumSize) bytes any such file of a store has", path: path)
        }
        return try file.readExactly(Int(size), at: 0)
    }
}
