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
        try check(rename(temporary, path), "rename", path)
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
            var offset = 0
            while offset < size {
                let n = pread(fd, buffer.baseAddress! + offset, size - offset, off_t(offset))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw SystemCallError(call: "pread", path: path, code: errno)
                }
                if n == 0 { break }
                offset += n
            }
            count = offset
        }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    public static func makeDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
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
