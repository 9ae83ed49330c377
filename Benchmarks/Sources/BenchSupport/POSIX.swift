import CBenchSupport
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error from a system call, naming the call, the path and errno.
public struct SystemCallError: Error, CustomStringConvertible {
    public var call: String
    public var path: String
    public var code: Int32
    public var description: String { "\(call)(\(path)): \(String(cString: strerror(code)))" }

    public init(call: String, path: String, code: Int32) {
        self.call = call
        self.path = path
        self.code = code
    }
}

/// Thin POSIX helpers: the peers and the limit probes use the same calls the engine does.
public enum POSIX {
    @inline(__always)
    static func check(_ rc: Int32, _ call: String, _ path: String) throws {
        if rc < 0 { throw SystemCallError(call: call, path: path, code: errno) }
    }

    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws -> Int32 {
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        try check(fd, "open", path)
        return fd
    }

    /// Writes every byte at the current offset.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String = "") throws {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "write", path: path, code: errno)
            }
            offset += n
        }
    }

    public static func fsync(_ fd: Int32, path: String = "") throws {
        try check(Glibc.fsync(fd), "fsync", path)
    }

    public static func fdatasync(_ fd: Int32, path: String = "") throws {
        try check(Glibc.fdatasync(fd), "fdatasync", path)
    }

    /// `fsync` of a directory, so the names created, renamed or removed in it are durable.
    public static func fsyncDirectory(_ path: String) throws {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        try fsync(fd, path: path)
    }

    /// Writes a whole file; with `sync`, `fsync`s it before closing.
    public static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer, sync: Bool) throws {
        let fd = try open(path, O_WRONLY | O_CREAT | O_TRUNC)
        defer { close(fd) }
        try writeAll(fd, bytes, path: path)
        if sync { try fsync(fd, path: path) }
    }

    /// The DataArchive-style atomic replace: write a temporary file, `fsync` it, `rename` it over
    /// the target. (No directory `fsync`: that is what the scheme being compared did.)
    public static func atomicWrite(_ path: String, _ bytes: UnsafeRawBufferPointer, temporarySuffix: String) throws {
        let temporary = path + temporarySuffix
        try writeFile(temporary, bytes, sync: true)
        try check(Glibc.rename(temporary, path), "rename", path)
    }

    /// Atomically swaps two existing paths (files or directories): after it, each name holds what
    /// the other held. Linux `renameat2(RENAME_EXCHANGE)`.
    public static func exchange(_ first: String, _ second: String) throws {
        try check(bench_exchange_paths(first, second), "renameat2(RENAME_EXCHANGE)", first + " <-> " + second)
    }

    public static func rename(_ source: String, to destination: String) throws {
        try check(Glibc.rename(source, destination), "rename", source + " -> " + destination)
    }

    /// Copies a file in the kernel (`copy_file_range`, which shares extents where the file system
    /// can), `fsync`ing the copy when `sync` is set.
    public static func copyFile(_ source: String, to destination: String, sync: Bool) throws {
        let input = try open(source, O_RDONLY)
        defer { close(input) }
        let output = try open(destination, O_WRONLY | O_CREAT | O_TRUNC)
        defer { close(output) }
        var info = stat()
        try check(fstat(input, &info), "fstat", source)
        var remaining = Int(info.st_size)
        while remaining > 0 {
            let n = bench_copy_file_range(input, output, UInt(remaining))
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "copy_file_range", path: destination, code: errno)
            }
            if n == 0 { break }
            remaining -= Int(n)
        }
        if sync { try fsync(output, path: destination) }
    }

    /// The names in a directory (no `.` or `..`), unsorted; nil if it does not exist.
    public static func directoryEntries(_ path: String) throws -> [String]? {
        guard let directory = opendir(path) else {
            if errno == ENOENT { return nil }
            throw SystemCallError(call: "opendir", path: path, code: errno)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The whole file; nil if it does not exist.
    public static func readFile(_ path: String) throws -> [UInt8]? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SystemCallError(call: "open", path: path, code: errno)
        }
        defer { close(fd) }
        var info = stat()
        try check(fstat(fd, &info), "fstat", path)
        let size = Int(info.st_size)
        return try [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = try readAll(fd, into: UnsafeMutableRawBufferPointer(buffer), path: path)
        }
    }

    /// `pread`s from offset 0 until `buffer` is full or the file ends; returns the bytes read.
    public static func readAll(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String = "") throws -> Int {
        var offset = 0
        while offset < buffer.count {
            let n = pread(fd, buffer.baseAddress! + offset, buffer.count - offset, off_t(offset))
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "pread", path: path, code: errno)
            }
            if n == 0 { break }
            offset += n
        }
        return offset
    }

    /// `pwrite`s every byte at `offset`.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int, path: String = "") throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "pwrite", path: path, code: errno)
            }
            done += n
        }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Creates a directory, with its missing parents when `intermediates` is set (an existing
    /// directory is fine then); without, one `mkdir` that fails if the path exists.
    public static func makeDirectory(_ path: String, intermediates: Bool = true) throws {
        if intermediates {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } else {
            try check(mkdir(path, 0o755), "mkdir", path)
        }
    }

    public static func unlink(_ path: String) throws {
        try check(Glibc.unlink(path), "unlink", path)
    }

    /// Bytes a directory tree occupies on disk (allocated blocks, as `du` counts them).
    public static func diskUsage(_ path: String) -> UInt64 {
        var total: UInt64 = 0
        var info = stat()
        guard lstat(path, &info) == 0 else { return 0 }
        total += UInt64(info.st_blocks) * 512
        if (info.st_mode & S_IFMT) == S_IFDIR {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                total += diskUsage(path + "/" + name)
            }
        }
        return total
    }

    /// Removes a directory tree (ignores a missing one).
    public static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A fresh, empty directory under the benchmark scratch root.
    public static func scratchDirectory(_ name: String) throws -> String {
        let path = scratchRoot + "/" + name
        removeTree(path)
        try makeDirectory(path)
        return path
    }

    /// `$CONTENTSTORE_BENCH_DIR`, else `$TMPDIR/contentstore-bench-PID`, else `/var/tmp/contentstore-bench-PID`.
    /// It should be on the disk being measured (not tmpfs) for the durable numbers to mean anything.
    public static let scratchRoot: String = {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["CONTENTSTORE_BENCH_DIR"], !explicit.isEmpty { return explicit }
        return (environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/var/tmp") + "/contentstore-bench-\(getpid())"
    }()
}
