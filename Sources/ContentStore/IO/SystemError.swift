#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call: the call's name and the `errno` it set.
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The C function that failed, such as `fdatasync`.
    public var call: String
    /// The `errno` value it set.
    public var errno: Int32

    init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// `call: strerror(errno) (errno N)`.
    public var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }

    /// Whether the failure means the disk is full.
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}
