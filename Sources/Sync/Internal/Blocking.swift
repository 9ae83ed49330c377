import NIOPosix

/// Runs a blocking Store call (file I/O, fsync, waiting for a group commit) on NIO's thread pool,
/// never on the cooperative pool or an event loop.
///
/// Store's own async twins are being added on another branch; when they land, the callers of this
/// function move to them and it goes away.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await NIOThreadPool.singleton.runIfActive(body)
}
