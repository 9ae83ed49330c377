internal import CContentStoreSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a path names, as `lstat(2)` sees it (a symlink is `other`).
enum FileKind: Sendable { case missing, directory, other }

/// The system calls ContentStore makes, one method per call. ``SystemFileIO`` makes them; tests
/// substitute implementations that inject errors or simulate a power cut between syncs.
///
/// Methods return `Result` with the call's `errno`; ``File`` and ``FileSystem`` turn failures into
/// ``StoreError``s that name the path.
protocol FileIO: Sendable {
    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError>
    func close(_ descriptor: Int32)
    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError>
    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError>
    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError>
    func fsync(_ descriptor: Int32) -> Result<Void, SystemError>
    /// Starts writing a range of the file out (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), without
    /// waiting and without making it durable: only so that a later sync has less left to do.
    func startWriteBack(_ descriptor: Int32, offset: UInt64, length: UInt64)
    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError>
    func size(_ descriptor: Int32) -> Result<UInt64, SystemError>
    /// `flock(LOCK_EX | LOCK_NB)`: false when another open file description holds the lock.
    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError>
    func rename(_ source: String, to destination: String) -> Result<Void, SystemError>
    /// A missing file is success.
    func unlink(_ path: String) -> Result<Void, SystemError>
    /// An existing directory is success.
    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError>
    func contents(ofDirectory path: String) -> Result<[String], SystemError>
    func kind(of path: String) -> FileKind
}

/// The real system calls, retrying `EINTR`.
struct SystemFileIO: FileIO {
    private func check(_ call: String, _ rc: Int32) -> Result<Void, SystemError> {
        rc == 0 ? .success(()) : .failure(SystemError(call, errno: errno))
    }

    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError> {
        let fd = retryingInterrupts { Glibc.open(path, flags, mode) }
        return fd >= 0 ? .success(fd) : .failure(SystemError("open", errno: errno))
    }

    func close(_ descriptor: Int32) { _ = Glibc.close(descriptor) }

    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        while true {
            let n = Glibc.pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return .success(n) }
            if errno != EINTR { return .failure(SystemError("pread", errno: errno)) }
        }
    }

    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        while true {
            let n = Glibc.pwrite(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return .success(n) }
            if errno != EINTR { return .failure(SystemError("pwrite", errno: errno)) }
        }
    }

    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError> {
        check("fdatasync", retryingInterrupts { Glibc.fdatasync(descriptor) })
    }

    func fsync(_ descriptor: Int32) -> Result<Void, SystemError> {
        check("fsync", retryingInterrupts { Glibc.fsync(descriptor) })
    }

    func startWriteBack(_ descriptor: Int32, offset: UInt64, length: UInt64) {
        // Advisory: a failure to start write-back shows at the sync that needs the data.
        _ = cs_start_write_back(descriptor, Int64(offset), Int64(length))
    }

    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError> {
        check("ftruncate", retryingInterrupts { Glibc.ftruncate(descriptor, off_t(length)) })
    }

    func size(_ descriptor: Int32) -> Result<UInt64, SystemError> {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return .failure(SystemError("fstat", errno: errno)) }
        return .success(UInt64(info.st_size))
    }

    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError> {
        if retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return .success(true) }
        return errno == EWOULDBLOCK ? .success(false) : .failure(SystemError("flock", errno: errno))
    }

    func rename(_ source: String, to destination: String) -> Result<Void, SystemError> {
        check("rename", Glibc.rename(source, destination))
    }

    func unlink(_ path: String) -> Result<Void, SystemError> {
        Glibc.unlink(path) == 0 || errno == ENOENT ? .success(()) : .failure(SystemError("unlink", errno: errno))
    }

    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError> {
        if Glibc.mkdir(path, mode) == 0 || (errno == EEXIST && kind(of: path) == .directory) { return .success(()) }
        return .failure(SystemError("mkdir", errno: errno))
    }

    func contents(ofDirectory path: String) -> Result<[String], SystemError> {
        guard let dir = opendir(path) else { return .failure(SystemError("opendir", errno: errno)) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }

    func kind(of path: String) -> FileKind {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        return (info.st_mode & S_IFMT) == S_IFDIR ? .directory : .other
    }
}

extension FileIO {
    /// Starting write-back early changes when data reaches the disk, never whether a sync makes it
    /// durable: implementations that model the disk (the fault-injecting ones in the tests) need not do it.
    func startWriteBack(_ descriptor: Int32, offset: UInt64, length: UInt64) {}
}

func retryingInterrupts(_ call: () -> Int32) -> Int32 {
    while true {
        let rc = call()
        if rc == -1 && errno == EINTR { continue }
        return rc
    }
}
