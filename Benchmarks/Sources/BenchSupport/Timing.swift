import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Seconds that `body` took.
@discardableResult
public func measureSeconds(_ body: () throws -> Void) rethrows -> Double {
    let start = monotonicNanoseconds()
    try body()
    return Double(monotonicNanoseconds() - start) / 1e9
}

/// Order statistics of a sample.
public struct Summary: Sendable, Codable {
    public var count: Int
    public var mean: Double
    public var median: Double
    public var p99: Double
    public var min: Double
    public var max: Double

    public init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        mean = sorted.isEmpty ? 0 : sorted.reduce(0, +) / Double(sorted.count)
        median = Summary.quantile(sorted, 0.5)
        p99 = Summary.quantile(sorted, 0.99)
        min = sorted.first ?? 0
        max = sorted.last ?? 0
    }

    /// Nearest-rank quantile of sorted values.
    public static func quantile(_ sorted: [Double], _ q: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((q * Double(sorted.count)).rounded(.up)) - 1
        return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank))]
    }
}

/// The median of `values` (0 when empty).
public func median(_ values: [Double]) -> Double {
    Summary.quantile(values.sorted(), 0.5)
}

/// Runs `body(index)` on `count` real threads at once and waits for all of them. Unlike
/// `DispatchQueue.concurrentPerform`, which runs about one iteration per core, all `count` threads
/// are started, so 16 writers really are 16 concurrent blocking callers. Rethrows the first error.
public func runThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let failure = Mutex<(any Error)?>(nil)
    let group = DispatchGroup()
    var threads: [Thread] = []
    for index in 0 ..< count {
        group.enter()
        let thread = Thread {
            do { try body(index) } catch { failure.withLock { if $0 == nil { $0 = error } } }
            group.leave()
        }
        thread.stackSize = 1 << 20
        threads.append(thread)
    }
    for thread in threads { thread.start() }
    group.wait()
    if let error = failure.withLock({ $0 }) { throw error }
}

/// A shared counter handing out work items to threads.
public final class WorkQueue: Sendable {
    private let nextIndex = Atomic<Int>(0)
    public let count: Int
    public init(count: Int) { self.count = count }
    /// The next unclaimed index, or nil when all are taken.
    public func next() -> Int? {
        let index = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
        return index < count ? index : nil
    }
}

/// Progress lines on stderr (stdout stays clean for results).
public enum Progress {
    private static let start = monotonicNanoseconds()
    public static func log(_ message: String) {
        let origin = start  // initialized on first use: read before the clock
        let elapsed = Double(monotonicNanoseconds() - origin) / 1e9
        FileHandle.standardError.write(Data((String(format: "[%6.1fs] ", elapsed) + message + "\n").utf8))
    }
}

/// CPU seconds (user + system) used so far by this process, or by its waited-for children.
public func cpuSeconds(children: Bool = false) -> Double {
    var usage = rusage()
    getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds used by the calling thread so far.
public func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Nanoseconds accumulated from several threads (time spent in one kind of call).
public final class TimeAccumulator: Sendable {
    private let nanoseconds = Atomic<UInt64>(0)
    public init() {}
    /// Runs `body`, adding its duration.
    public func time<T>(_ body: () throws -> T) rethrows -> T {
        let start = monotonicNanoseconds()
        defer { nanoseconds.add(monotonicNanoseconds() - start, ordering: .relaxed) }
        return try body()
    }
    /// Seconds accumulated since the last call; resets.
    public func take() -> Double { Double(nanoseconds.exchange(0, ordering: .relaxed)) / 1e9 }
}
