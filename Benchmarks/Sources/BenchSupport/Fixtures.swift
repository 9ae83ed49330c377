import ContentStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Stores the ordo-one suites open and fill. Each lives in its own scratch directory, removed by
/// ``StoreFixture/remove()``.
public final class StoreFixture: @unchecked Sendable {
    public let directory: String
    public private(set) var store: Store
    public let configuration: Store.Configuration
    /// Blob digests grouped by the record that references them (key `group/<n>`).
    public private(set) var groups: [[Digest]] = []

    /// The default configuration with info logs silenced (benchmark output stays readable).
    public static func configuration(_ adjust: (inout Store.Configuration) -> Void = { _ in }) -> Store.Configuration {
        var configuration = Store.Configuration()
        configuration.logger.logLevel = .warning
        adjust(&configuration)
        return configuration
    }

    /// The configuration for stores of very many small blobs: the default, or packs of
    /// CONTENTSTORE_BENCH_PACK_SIZE bytes when that is set (to see how pack size affects collection
    /// and opening). Until engine commit f0af0c2, an append copied the active pack's whole index, so
    /// filling 64 MiB packs with 128-byte blobs was quadratic and these suites needed 1 MiB packs.
    public static func smallBlobConfiguration(_ adjust: (inout Store.Configuration) -> Void = { _ in }) -> Store.Configuration {
        configuration { configuration in
            if let size = smallBlobPackSize { configuration.packSizeTarget = size }
            adjust(&configuration)
        }
    }

    public static let smallBlobPackSize: UInt64? = {
        ProcessInfo.processInfo.environment["CONTENTSTORE_BENCH_PACK_SIZE"].flatMap { UInt64($0) }
    }()

    public init(_ name: String, configuration: Store.Configuration = StoreFixture.configuration()) throws {
        directory = try POSIX.scratchDirectory(name)
        self.configuration = configuration
        store = try Store(at: URL(fileURLWithPath: directory), configuration: configuration)
    }

    /// Closes and reopens the store (what an open benchmark measures).
    public func reopen() throws {
        try store.close()
        store = try Store(at: URL(fileURLWithPath: directory), configuration: configuration)
    }

    public func close() throws { try store.close() }

    public func remove() {
        try? store.close()
        POSIX.removeTree(directory)
        rmdir(POSIX.scratchRoot)  // the per-process root, once empty
    }

    /// Puts `count` distinct blobs of `size` bytes (text-like, so they compress as real data does)
    /// from `threads` threads, then commits records referencing them, `perRecord` digests each,
    /// in shuffled order so that removing one record leaves garbage spread over the packs.
    public func populate(blobs count: Int, size: Int, perRecord: Int = 100, threads: Int = 2, seed: UInt64 = 1, log: Bool = false) throws {
        let started = monotonicNanoseconds()
        let queue = WorkQueue(count: count)
        let results = UnsafeDigestBuffer(count: count)
        let store = store
        try runThreads(threads) { thread in
            var generator = ContentGenerator(seed: seed &+ UInt64(thread) &* 7919)
            var block = generator.textBlock(size: max(size, 64))
            if block.count > size { block.removeSubrange(size...) }
            while let index = queue.next() {
                // Distinct content: the blob's index in its first 8 bytes.
                withUnsafeBytes(of: UInt64(index) &* 0x9E37_79B9_7F4A_7C15) { tag in
                    for i in 0 ..< min(8, block.count) { block[i] = tag[i] }
                }
                results[index] = try block.withUnsafeBytes { try store.put(Data($0)) }
            }
        }
        var digests = results.digests
        var random = DeterministicRandom(seed: seed)
        for i in digests.indices.reversed() { digests.swapAt(i, random.below(i + 1)) }
        let firstGroup = groups.count
        let newGroups = stride(from: 0, to: digests.count, by: perRecord).map { Array(digests[$0 ..< min($0 + perRecord, digests.count)]) }
        groups.append(contentsOf: newGroups)
        // 100 records per transaction keeps the commits few and the transactions small.
        for start in stride(from: 0, to: newGroups.count, by: 100) {
            try store.write { transaction in
                for offset in start ..< min(start + 100, newGroups.count) {
                    try transaction.setRecord(Record(references: newGroups[offset]), forKey: Self.groupKey(firstGroup + offset))
                }
            }
        }
        if log {
            let seconds = Double(monotonicNanoseconds() - started) / 1e9
            Progress.log(String(format: "fixture %@: %d blobs of %d bytes in %.1f s (%.0f puts/s), packs of %d KiB",
                                (directory as NSString).lastPathComponent, count, size, seconds, Double(count) / seconds,
                                Int(configuration.packSizeTarget >> 10)))
        }
    }

    public static func groupKey(_ index: Int) -> String { "group/" + String(index) }

    /// Removes the records of `groupIndices`: their blobs become garbage.
    public func dropGroups(_ groupIndices: [Int]) throws {
        try store.write { transaction in
            for index in groupIndices { try transaction.removeRecord(forKey: Self.groupKey(index)) }
        }
    }
}

/// Digests written by index from several threads (each index by exactly one thread, read after
/// they have all been joined), in raw memory so no exclusivity check sees the concurrent writes.
final class UnsafeDigestBuffer: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Digest?>
    private let count: Int
    init(count: Int) {
        self.count = count
        storage = .allocate(capacity: count)
        storage.initialize(repeating: nil, count: count)
    }
    deinit {
        storage.deinitialize(count: count)
        storage.deallocate()
    }
    subscript(index: Int) -> Digest? {
        get { storage[index] }
        set { storage[index] = newValue }
    }
    var digests: [Digest] { (0 ..< count).map { storage[$0]! } }
}

/// Resident memory of this process, from /proc/self/status.
public enum ResidentMemory {
    /// VmRSS in bytes: ``anonymous`` plus ``fileBacked`` (plus shared memory, which we do not use).
    public static var current: Int { field("VmRSS:") }
    /// RssAnon in bytes: the process's own memory (heap, stacks), what its data structures take.
    public static var anonymous: Int { field("RssAnon:") }
    /// RssFile in bytes: pages of mapped files, mostly the code of the program and its libraries
    /// the process has run so far.
    public static var fileBacked: Int { field("RssFile:") }
    /// VmHWM (peak RSS since start or the last ``resetPeak()``) in bytes.
    public static var peak: Int { field("VmHWM:") }

    /// Resets VmHWM to the current RSS (Linux: writing 5 to /proc/self/clear_refs).
    public static func resetPeak() {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return }
        _ = write(fd, "5", 1)
        close(fd)
    }

    private static func field(_ name: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return 0 }
        let digits = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return digits * 1024
    }
}
