#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// The read cache's size bounds the memory it really takes: a full cache's heap, measured with
/// glibc's `malloc_info`, is no more than what it accounts (``BlobCache/bytes``), and not far below it.
///
/// The heap is process-wide and the other tests allocate beside this one, so the measurement runs in
/// a child: this test binary again, running only ``heapOfAFullCacheInThisProcess``.
@Suite(.blocking) struct BlobCacheMemoryTests {
    static let childVariable = "CONTENTSTORE_CACHE_HEAP_BLOB_SIZE"
    static let capacity = 16 << 20

    /// A sanitizer's allocator keeps its own books, which `malloc_info` does not see.
    static let underSanitizer = dlsym(everyLoadedObject, "__tsan_init") != nil || dlsym(everyLoadedObject, "__asan_init") != nil
    /// glibc's `RTLD_DEFAULT` (a null handle), which the Glibc module does not import.
    static var everyLoadedObject: UnsafeMutableRawPointer? { nil }

    /// Tiny blobs, where the overhead is most of an item, and the 4 KiB blobs the read benchmarks use.
    @Test(.enabled(if: !underSanitizer, "a sanitizer's allocator is not glibc's, whose heap malloc_info reports"),
          arguments: [64, 4096])
    func aFullCacheTakesNoMoreHeapThanItsSize(blobSize: Int) throws {
        let output = try Self.runChild(blobSize: blobSize)
        let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("cache-heap:") }, "the child printed: \(output)")
        let fields = line.split(separator: " ").dropFirst().map { $0.split(separator: "=") }
        let values = Dictionary(uniqueKeysWithValues: fields.map { (String($0[0]), Int($0[1]) ?? -1) })
        let (accounted, heap, items) = (try #require(values["accounted"]), try #require(values["heap"]), try #require(values["items"]))
        #expect(accounted <= Self.capacity)
        #expect(accounted > Self.capacity - 2 * (blobSize + BlobCache.itemOverhead), "the cache was filled")
        #expect(heap <= accounted, "\(items) items of \(blobSize) bytes take \(heap) bytes of heap; \(accounted) accounted")
        // Counted at their most, the overheads stay within a third of what the items really take.
        #expect(heap >= accounted * 2 / 3, "\(items) items of \(blobSize) bytes take \(heap) bytes of heap; \(accounted) accounted")
    }

    /// Fills a cache with twice the blobs it holds (so it has evicted, as a busy cache has) and
    /// prints its accounted bytes and the heap it grew by.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func heapOfAFullCacheInThisProcess() throws {
        let blobSize = try #require(ProcessInfo.processInfo.environment[Self.childVariable].flatMap { Int($0) })
        let items = Self.capacity / (blobSize + BlobCache.itemOverhead)
        var random = SeededRandom(seed: UInt64(blobSize))
        let before = try Self.heapInUse()
        let cache = BlobCache(capacity: Self.capacity)
        for _ in 0 ..< 2 * items {
            // Made as a pack read makes them (PackReader.decodeEntry).
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: blobSize, alignment: 16)
            random.bytes(blobSize).copyBytes(to: bytes)
            let blob = Data(bytesNoCopy: bytes.baseAddress!, count: blobSize, deallocator: .custom { pointer, _ in pointer.deallocate() })
            cache.insert(blob, for: Digest.sha256(blob))
        }
        let heap = try Self.heapInUse() - before
        print("cache-heap: accounted=\(cache.bytes) heap=\(heap) items=\(items)")
        withExtendedLifetime(cache) {}
    }

    /// Bytes malloc has handed out and not had back, in its arenas and its own mappings (what
    /// `mallinfo2` reports as `uordblks + hblkhd`), from glibc's `malloc_info`: the Glibc module
    /// does not import <malloc.h>, and `malloc_info` is the one of its functions a C function type
    /// can call (no structure returned by value). Its last totals are the whole heap's: the system
    /// bytes of the arenas less their free chunks, plus the mappings.
    static func heapInUse() throws -> Int {
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        let symbol = try #require(dlsym(everyLoadedObject, "malloc_info"))
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        let stream = try #require(open_memstream(&buffer, &size))
        #expect(unsafeBitCast(symbol, to: MallocInfo.self)(0, stream) == 0)
        fclose(stream)
        defer { free(buffer) }
        let xml = String(cString: try #require(buffer))
        let sizes = try ["<system type=\"current\"", "<total type=\"fast\"", "<total type=\"rest\"", "<total type=\"mmap\""].map {
            try #require(lastSize(of: $0, in: xml), "malloc_info printed no \($0): \(xml.suffix(1000))")
        }
        return sizes[0] - sizes[1] - sizes[2] + sizes[3]
    }

    /// The `size` attribute of the last element starting with `element`.
    static func lastSize(of element: String, in xml: String) -> Int? {
        guard let line = xml.split(separator: "\n").last(where: { $0.contains(element) }),
              let size = line.split(separator: " ").last(where: { $0.hasPrefix("size=") })
        else { return nil }
        return Int(size.dropFirst(6).prefix { $0.isNumber })
    }

    /// Runs this test binary with only the child test; returns what it printed.
    static func runChild(blobSize: Int) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        process.arguments = ["--testing-library", "swift-testing", "--filter", "heapOfAFullCacheInThisProcess"]
        process.environment = ProcessInfo.processInfo.environment.merging([childVariable: "\(blobSize)"]) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "the child failed: \(output.suffix(2000))")
        return output
    }
}
