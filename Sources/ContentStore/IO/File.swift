#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open file descriptor, closed when the last reference goes away.
///
/// Reference counting matters: a reader that looked up a pack keeps reading from it even if a
/// collector unlinks the file meanwhile, and the descriptor number is never reused under it.
/// Methods complete short transfers and report failures as ``StoreError`` with code `io`, naming
/// the path, with the ``SystemError`` as the cause.
final class File: Sendable {
    let descriptor: Int32
    let path: String
    private let io: any FileIO

    init(descriptor: Int32, path: String, io: any FileIO) {
        self.descriptor = descriptor
        self.path = path
        self.io = io
    }

    deinit { io.close(descriptor) }

    /// `pread(2)` until `buffer` is full; returns fewer bytes only at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            switch io.pread(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + UInt64(done)) {
            case .success(0): return done
            case .success(let n): done += n
            case .failure(let error): throw StoreError.io("cannot read at offset \(offset + UInt64(done))", path: path, cause: error)
            }
        }
        return done
    }

    /// `pread(2)` of exactly `count` bytes; a short read is `corrupted` (the file is shorter than the index says).
    func readExactly(_ count: Int, at offset: UInt64) throws -> [UInt8] {
        // Uninitialized: the read fills every byte, and zero-filling first costs as much as a small read.
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            try readExactly(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            initialized = count
        }
    }

    /// `pread(2)` filling all of `buffer`; a short read is `corrupted`.
    func readExactly(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws {
        let n = try read(into: buffer, at: offset)
        guard n == buffer.count else {
            throw StoreError.corrupted("expected \(buffer.count) bytes, file ends after \(n)", path: path, offset: offset)
        }
    }

    /// `pwrite(2)` of all of `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < bytes.count {
            switch io.pwrite(descriptor, from: UnsafeRawBufferPointer(rebasing: bytes[done...]), at: offset + UInt64(done)) {
            case .success(let n): done += n
            case .failure(let error): throw StoreError.io("cannot write at offset \(offset + UInt64(done))", path: path, cause: error)
            }
        }
    }

    func write(_ bytes: [UInt8], at offset: UInt64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// `fdatasync(2)`: the file's data (and the size it needs to read back) reaches stable storage.
    func synchronizeData() throws {
        if case .failure(let error) = io.fdatasync(descriptor) { throw StoreError.io("cannot sync", path: path, cause: error) }
    }

    /// Starts writing `length` bytes from `offset` out to the disk, without waiting (see ``FileIO/startWriteBack(_:offset:length:)``).
    func startWriteBack(offset: UInt64, length: UInt64) {
        io.startWriteBack(descriptor, offset: offset, length: length)
    }

    /// `fsync(2)`: data and metadata. Used on directories, after creating, renaming or unlinking in them.
    func synchronize() throws {
        if case .failure(let error) = io.fsync(descriptor) { throw StoreError.io("cannot sync", path: path, cause: error) }
    }

    /// `fstat(2)`'s `st_size`.
    func size() throws -> UInt64 {
        try io.size(descriptor).mapError { StoreError.io("cannot stat", path: path, cause: $0) }.get()
    }

    /// `ftruncate(2)`.
    func truncate(to length: UInt64) throws {
        if case .failure(let error) = io.ftruncate(descriptor, length: length) {
            throw StoreError.io("cannot truncate to \(length) bytes", path: path, cause: error)
        }
    }

    /// `flock(2)` with `LOCK_EX | LOCK_NB`; false when another open file description holds it.
    func tryLockExclusively() throws -> Bool {
        try io.lockExclusively(descriptor).mapError { StoreError.io("cannot lock", path: path, cause: $0) }.get()
    }
}
