import BenchSupport
import ContentStore
import Foundation

/// One storage engine under comparison. Every contender does the same work for each workload:
/// SHA-256 over every byte (through the engine's `Digest.sha256`), zstd level 3 over the unique
/// bytes, and durable storage.
protocol Contender: AnyObject, Sendable {
    var name: String { get }

    /// Stores every corpus file as a blob plus a record `path → digest`, using `threads` threads;
    /// everything is durable when it returns. Called twice: the second time is the re-ingest of the
    /// unchanged corpus (the dedup path).
    func ingest(_ corpus: Corpus, threads: Int) throws

    /// Removes the records of `paths` and collects what only they referenced, in one or more timed
    /// steps; `diskUsage` (not timed) gives the bytes on disk after each.
    func deleteAndCollect(_ paths: [String], diskUsage: () -> UInt64) throws -> [CollectStep]

    /// One durable single-record commit; called from many threads at once.
    func commit(key: String, value: Data) throws

    /// Setup for point reads (not timed): stores blobs, durably by the end of `finishPuts`.
    func put(_ block: [UInt8]) throws -> Digest
    func finishPuts() throws

    /// Reads a blob back, decompressed and verified against its digest; returns its size.
    func read(_ digest: Digest) throws -> Int

    func close() throws
}

struct CollectStep {
    var name: String
    var seconds: Double
    var diskBytesAfter: UInt64
}

struct VerificationFailed: Error, CustomStringConvertible {
    var description: String
}

/// Manifest records are keyed by corpus path.
func recordKey(_ path: String) -> String { "file/" + path }
