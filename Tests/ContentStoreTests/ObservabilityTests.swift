import Foundation
import Logging
import MetricsTestKit
import Synchronization
import Testing
import TestThreads
@testable import ContentStore

@Suite(.blocking) struct MetricsTests {
    private func open(_ dir: TemporaryDirectory, _ metrics: TestMetrics, durability: Store.Durability = .none) throws -> Store {
        var configuration = Store.Configuration.testing(durability: durability)
        configuration.metricsFactory = metrics
        return try Store(at: dir.store, configuration: configuration)
    }

    private func total(_ metrics: TestMetrics, _ label: String) -> Int64 { metrics.counterTotal(label: label) }

    @Test func commitsCountOnlyWritesThatCommitted() async throws {
        let dir = TemporaryDirectory()
        let metrics = TestMetrics()
        let store = try open(dir, metrics, durability: .full)
        try blocking { try store.write { tx in try tx.setRecord(Record(value: Data("a".utf8)), forKey: "a") } }
        try await store.write { tx in try tx.setRecord(Record(value: Data("b".utf8)), forKey: "b") }
        // Changed nothing, threw, refused: no commit.
        try blocking { try store.write { _ in } }
        #expect(throws: StoreError.self) {
            try blocking { try store.write { tx in try tx.setRecord(Record(references: [Digest.sha256(Data("absent".utf8))]), forKey: "c") } }
        }
        struct Failure: Error {}
        #expect(throws: Failure.self) { try blocking { try store.write { tx in try tx.setRecord(Record(), forKey: "d"); throw Failure() } } }
        #expect(total(metrics, "contentstore_commits_total") == 2)
        #expect(try metrics.expectTimer("contentstore_commit_duration").values.count == 2)
        // Durable commits fsync the log: at least one sync, at most one per commit.
        let syncs = total(metrics, "contentstore_wal_syncs_total")
        #expect(syncs >= 1 && syncs <= 2)
        try blocking { try store.close() }
    }

    @Test func putsGetsAndCacheHits() async throws {
        let dir = TemporaryDirectory()
        let metrics = TestMetrics()
        let store = try open(dir, metrics)
        let hello = Data("hello".utf8)
        let digest = try blocking { try store.put(hello) }
        try blocking { try store.put(hello) }                   // deduplicated: still a put, with its bytes
        try await store.put(Data("async".utf8))
        let file = dir.url.appendingPathComponent("file")
        try Data(repeating: 7, count: 1000).write(to: file)
        try blocking { try store.put(contentsOf: file) }
        #expect(total(metrics, "contentstore_puts_total") == 4)
        #expect(total(metrics, "contentstore_put_bytes_total") == Int64(5 + 5 + 5 + 1000))

        _ = try blocking { try store.get(digest) }  // read from the pack, then cached
        _ = try blocking { try store.get(digest) }  // a hit
        _ = try await store.get(digest)           // a hit on the calling task
        #expect(throws: StoreError.self) { try blocking { try store.get(Digest.sha256(Data("absent".utf8))) } }
        #expect(total(metrics, "contentstore_gets_total") == 4)
        #expect(total(metrics, "contentstore_read_cache_hits_total") == 2)
        try blocking { try store.close() }
    }

    @Test func collectionsAndGauges() async throws {
        let dir = TemporaryDirectory()
        let metrics = TestMetrics()
        let store = try open(dir, metrics)
        let kept = try blocking { try store.put(Data("kept".utf8)) }
        for index in 0 ..< 10 { try blocking { try store.put(Data("garbage \(index)".utf8)) } }
        try blocking { try store.write { tx in try tx.setRecord(Record(references: [kept]), forKey: "k") } }
        var options = GarbageCollectionOptions()
        options.gracePeriod = .zero
        options.dryRun = true
        _ = try blocking { try store.collectGarbage(options) }  // a dry run: not counted
        #expect(total(metrics, "contentstore_gc_runs_total") == 0)
        options.dryRun = false
        let report = try await store.collectGarbage(options)
        #expect(report.blobsRemoved == 10)
        #expect(total(metrics, "contentstore_gc_runs_total") == 1)
        #expect(total(metrics, "contentstore_gc_blobs_removed_total") == 10)
        #expect(total(metrics, "contentstore_gc_bytes_freed_total") == Int64(report.bytesFreed))

        let statistics = try blocking { try store.statistics() }
        #expect(try metrics.expectGauge("contentstore_blobs").lastValue == 1)
        #expect(try metrics.expectGauge("contentstore_records").lastValue == 1)
        #expect(try metrics.expectGauge("contentstore_stored_bytes").lastValue == Double(statistics.storedBytes))
        try blocking { try store.close() }
    }
}

@Suite(.blocking) struct LoggingTests {
    /// Puts, commits, collection, checkpoint, verification and a damaged read: routine messages at
    /// info or below, damage at error, and no message or metadata holds a record value or blob bytes.
    @Test func logsNameCausesButNeverValuesOrContent() throws {
        let dir = TemporaryDirectory()
        let captured = CapturedLogs()
        var configuration = Store.Configuration.testing()
        configuration.logger = Logger(label: "test") { _ in captured }
        configuration.logger.logLevel = .trace
        let secretValue = "value-SECRET-7d1c"
        let secretContent = "content-SECRET-93ab-" + String(repeating: "x", count: 2000)
        let digest: Digest
        do {
            let store = try Store(at: dir.store, configuration: configuration)
            digest = try store.put(Data(secretContent.utf8))
            let garbage = try store.put(Data("garbage-SECRET-5e5e".utf8))
            try store.write { tx in try tx.setRecord(Record(value: Data(secretValue.utf8), references: [digest]), forKey: "doc") }
            _ = garbage
            var options = GarbageCollectionOptions()
            options.gracePeriod = .zero
            _ = try store.collectGarbage(options)
            try store.checkpoint()
            _ = try store.verify(.init(readData: true))
            try store.close()
        }
        // Damage the blob's stored bytes: the read fails, and the failure is logged at error.
        let pack = try #require(try FileManager.default.contentsOfDirectory(at: dir.store.appendingPathComponent("packs"), includingPropertiesForKeys: nil)
            .first { $0.pathExtension == "pack" })
        var configurationWithoutCache = configuration
        configurationWithoutCache.readCacheSize = 0
        let store = try Store(at: dir.store, configuration: configurationWithoutCache)
        let entry = try #require(store.core.withLock { $0.state.blobs[digest] })
        try store.close()
        try flipBit(in: pack, at: Int(entry.location.offset) + PackFormat.entryHeaderSize + Int(entry.storedLength) / 2, bit: 2)
        let damaged = try Store(at: dir.store, configuration: configurationWithoutCache)
        #expect(throws: StoreError.self) { try damaged.get(digest) }
        #expect(try !damaged.verify(.init(readData: true)).isClean)
        try damaged.close()

        let entries = captured.entries
        #expect(entries.contains { $0.level == .info && $0.message == "garbage collected" })
        #expect(entries.contains { $0.level == .info && $0.message == "checkpoint written" })
        #expect(entries.contains { $0.level == .error && $0.message == "damaged blob" && $0.text.contains(digest.hex) && $0.text.contains(pack.lastPathComponent) })
        #expect(entries.contains { $0.level == .error && $0.message == "verification found damage" })
        for entry in entries {
            #expect(!entry.text.contains("SECRET"), "a log message holds a value or blob content: \(entry.text)")
            if entry.level >= .warning { #expect(["damaged blob", "verification found damage", "damage"].contains(entry.message)) }
        }
    }
}

/// Calls the blocking overloads from async code (a synchronous closure selects them).
@discardableResult func blocking<T>(_ body: () throws -> T) rethrows -> T { try body() }

/// A LogHandler that keeps every message, for tests.
final class CapturedLogs: LogHandler, @unchecked Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
        /// The message and its metadata as one string, for searching.
        var text: String { message + " " + metadata.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ") }
    }

    private let stored = Mutex<[Entry]>([])
    var entries: [Entry] { stored.withLock { $0 } }
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        stored.withLock { $0.append(Entry(level: event.level, message: "\(event.message)", metadata: event.metadata ?? [:])) }
    }
}
