#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open file descriptor, closed when the last reference goes away.
///
/// Reference counting matters: a reader that looked up a pack keeps reading from it even if a
/// collector unlinks the file meanwhile, and the descriptor number is never reused under it.
/// Every method is a thin wrapper over one system call (named in its documentation) that retries
/// `EINTR` and short transfers, and reports failures as ``StoreError`` with code `io` naming the path.
final class File: Sendable {
    let descriptor: Int32
    let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { _ = close(descriptor) }

    /// `open(2)` with `O_CLOEXEC | O_NOFOLLOW` added, so a symlink planted in the store is refused.
    static func open(_ path: String, flags: Int32, mode: mode_t = 0o600) throws -> File {
        let fd = retryingInterrupts { Glibc.open(path, flags | O_CLOEXEC | O_NOFOLLOW, mode) }
        guard fd >= 0 else { throw StoreError.io("cannot open", path: path, cause: SystemError("open", errno: errno)) }
        return File(descriptor: fd, path: path)
    }

    /// `pread(2)` until `buffer` is full; returns fewer bytes only at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError.io("cannot read at offset \(offset + UInt64(done))", path: path, cause: SystemError("pread", errno: errno))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// `pread(2)` of exactly `count` bytes; a short read is `corrupted` (the file is shorter than the index says).
    func readExactly(_ count: Int, at offset: UInt64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try read(into: $0, at: offset) }
        guard n == count else {
            throw StoreError.corrupted("expected \(count) bytes, file ends after \(n)", path: path, offset: offset)
        }
        return bytes
    }

    /// `pwrite(2)` of all of `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError.io("cannot write at offset \(offset + UInt64(done))", path: path, cause: SystemError("pwrite", errno: errno))
            }
            done += n
        }
    }

    func write(_ bytes: [UInt8], at offset: UInt64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// `fdatasync(2)`: the file's data (and the size it needs to read back) reaches stable storage.
    func synchronizeData() throws {
        #if canImport(Glibc)
        let rc = retryingInterrupts { fdatasync(descriptor) }
        #else
        let rc = retryingInterrupts { fcntl(descriptor, F_FULLFSYNC) }
        #endif
        guard rc == 0 else { throw StoreError.io("cannot sync", path: path, cause: SystemError("fdatasync", errno: errno)) }
    }

    /// `fsync(2)`: data and metadata. Used on directories, after creating, renaming or unlinking in them.
    func synchronize() throws {
        let rc = retryingInterrupts { fsync(descriptor) }
        guard rc == 0 else { throw StoreError.io("cannot sync", path: path, cause: SystemError("fsync", errno: errno)) }
    }

    /// `fstat(2)`'s `st_size`.
    func size() throws -> UInt64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw StoreError.io("cannot stat", path: path, cause: SystemError("fstat", errno: errno))
        }
        return UInt64(info.st_size)
    }

    /// `ftruncate(2)`.
    func truncate(to length: UInt64) throws {
        let rc = retryingInterrupts { ftruncate(descriptor, off_t(length)) }
        guard rc == 0 else { throw StoreError.io("cannot truncate to \(length) bytes", path: path, cause: SystemError("ftruncate", errno: errno)) }
    }

    /// `flock(2)` with `LOCK_EX | LOCK_NB`; false when another open file description holds it.
    func tryLockExclusively() throws -> Bool {
        if retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw StoreError.io("cannot lock", path: path, cause: SystemError("flock", errno: errno))
    }
}

func retryingInterrupts(_ call: () -> Int32) -> Int32 {
    while true {
        let rc = call()
        if rc == -1 && errno == EINTR { continue }
        return rc
    }
}
