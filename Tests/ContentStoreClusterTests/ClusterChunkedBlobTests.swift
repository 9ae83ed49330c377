import ContentStore
import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing
@testable import ContentStoreCluster

/// Chunked blobs, streaming with bounded memory, the packer and the `put`/`export` leases on a
/// cluster store (Docs/cluster.md §3.1 step 5, §3.2, §6.2), against the real services.
@Suite(.serialized, .enabled(if: ClusterTestEnvironment.current != nil, ClusterTestEnvironment.skipMessage))
struct ClusterChunkedBlobTests {
    @Test func aFileMuchLargerThanMemoryBoundsStreamsThroughPutAndExport() async throws {
        try await withClusterStore { store, cluster, directory in
            let size = 160 << 20
            let file = directory.appendingPathComponent("large")
            let expected = try writeFile(file, size: size, seed: 1)
            // Measured in a process of its own: tests running beside this one share this one's peak.
            let exported = directory.appendingPathComponent("exported")
            let output = try await runWorkload(["stream", file.path, exported.path], cluster: cluster)
            let fields = output.split(separator: " ").map(String.init)
            let putPeak = try #require(fields.count == 3 ? Int(fields[1]) : nil, "workload printed \(output)")
            let exportPeak = try #require(Int(fields[2]))
            let digest = try #require(Digest(hex: fields[0]))
            #expect(digest == expected)
            #expect(store.info(for: digest)?.size == size)
            #expect(try hashFile(exported) == expected)
            // A put: one read batch, one pack of 8 MiB and the copies its upload makes, plus what
            // malloc keeps in its arenas (40 to 61 MiB measured); an export: one leaf's chunks (under
            // 2 MiB measured). Neither grows with the content; holding it would take 160 MiB.
            #expect(putPeak < size / 2, "a put of \(size) bytes raised the peak resident memory by \(putPeak) bytes")
            #expect(exportPeak < size / 8, "an export of \(size) bytes raised the peak resident memory by \(exportPeak) bytes")
            // The same chunks and digest as the embedded store's chunker gives.
            let chunks = try chunkDigests(of: file)
            let stored = try await rows(cluster, "SELECT digest FROM contentstore.blobs WHERE children IS NULL")
            #expect(stored.isSuperset(of: chunks))
            #expect(try await onThread { try store.verify(VerificationOptions(readData: true)) }.isClean)
        }
    }

    @Test func anIdenticalFileUploadsNothingAndAnEditedOneOnlyItsNewChunks() async throws {
        try await withClusterStore { store, cluster, directory in
            let original = directory.appendingPathComponent("original")
            let digest = try writeFile(original, size: 6 << 20, seed: 2)
            #expect(try await onThread { try store.put(contentsOf: original) } == digest)
            let packs = try await packBytes(cluster)
            let copy = directory.appendingPathComponent("copy")
            try FileManager.default.copyItem(at: original, to: copy)
            #expect(try await onThread { try store.put(contentsOf: copy) } == digest)
            #expect(try await packBytes(cluster) == packs)
            // A 4 KiB overwrite in the middle: a few new chunks (and nodes), not a new copy.
            let handle = try FileHandle(forWritingTo: copy)
            try handle.seek(toOffset: 3 << 20)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
            try handle.close()
            let edited = try await onThread { try store.put(contentsOf: copy) }
            #expect(edited != digest)
            let added = try await packBytes(cluster) - packs
            #expect(added > 0 && added < 256 << 10, "an edit uploaded \(added) bytes")
            let exported = directory.appendingPathComponent("exported")
            try await onThread { try store.export(edited, to: exported) }
            #expect(try Data(contentsOf: exported) == Data(contentsOf: copy))
            // put(Data) of the same bytes is the same chunked blob: nothing new.
            let before = try await packBytes(cluster)
            #expect(try await onThread { try store.put(Data(contentsOf: original)) } == digest)
            #expect(try await onThread { try store.get(digest) } == Data(contentsOf: original))
            #expect(try await packBytes(cluster) == before)
        }
    }

    @Test func chunksAreCollectedOnlyWhenNothingReferencesTheirManifest() async throws {
        var configuration = StoreLocation.configuration
        configuration.garbageGracePeriod = .zero
        try await withClusterStore(configuration: configuration) { store, cluster, directory in
            let first = directory.appendingPathComponent("first")
            let firstDigest = try writeFile(first, size: 3 << 20, seed: 3)
            let second = directory.appendingPathComponent("second")
            try FileManager.default.copyItem(at: first, to: second)
            let handle = try FileHandle(forWritingTo: second)
            try handle.seek(toOffset: 1 << 20)
            try handle.write(contentsOf: Data(repeating: 7, count: 100))
            try handle.close()
            let secondDigest = try hashFile(second)
            let put = try await onThread { [try store.put(contentsOf: first), try store.put(contentsOf: second)] }
            #expect(put == [firstDigest, secondDigest])
            try await onThread {
                try store.write { transaction in
                    try transaction.setRecord(Record(references: [firstDigest]), forKey: "first")
                    try transaction.setRecord(Record(references: [secondDigest]), forKey: "second")
                }
                _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            }
            let all = try await rows(cluster, "SELECT digest FROM contentstore.blobs")
            #expect(try await onThread { try store.get(firstDigest) } == Data(contentsOf: first))
            try await onThread {
                try store.write { try $0.removeRecord(forKey: "first") }
                _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            }
            // Only what the first file alone held went: its root and nodes, and its own chunks.
            let left = try await rows(cluster, "SELECT digest FROM contentstore.blobs")
            let firstOnly = try chunkDigests(of: first).subtracting(chunkDigests(of: second))
            #expect(!firstOnly.isEmpty && left.isDisjoint(with: firstOnly))
            #expect(!left.contains(firstDigest) && left.count < all.count)
            #expect(left.isSuperset(of: try chunkDigests(of: second)))
            #expect(try await onThread { try store.get(secondDigest) } == Data(contentsOf: second))
            #expect(try await onThread { try store.verify(VerificationOptions(readData: true)) }.isClean)
            try await onThread {
                try store.write { try $0.removeRecord(forKey: "second") }
                _ = try store.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero))
            }
            #expect(try await rows(cluster, "SELECT digest FROM contentstore.blobs").isEmpty)
        }
    }

    @Test func thePackerMovesInlineBlobsIntoPacksWhileReadsGoOn() async throws {
        try await withClusterStore(packSizeTarget: 64 << 10) { store, cluster, _ in
            var generator = SplitMix64(seed: 4)
            let blobs = (0 ..< 48).map { _ in Data((0 ..< 4096).map { _ in UInt8(truncatingIfNeeded: generator.next()) }) }
            let digests = try await onThread { try blobs.map { try store.put($0) } }
            try await onThread {
                try store.write { try $0.setRecord(Record(references: digests), forKey: "all") }
            }
            #expect(try await inlineBytes(cluster) >= 48 * 4096)
            let reader = try await StoreLocation(backend: .cluster, cluster: cluster).open(Self.uncached)
            defer { try? reader.close() }
            let stop = StopFlag()
            async let reads: Int = onThread {
                var rounds = 0
                while !stop.isSet || rounds == 0 {
                    for (digest, bytes) in zip(digests, blobs) where try reader.get(digest) != bytes {
                        throw StoreError(code: .corrupted, message: "blob \(digest) read back wrong during packing")
                    }
                    rounds += 1
                }
                return rounds
            }
            do {
                _ = try await onThread { try store.collectGarbage() }
            } catch {
                stop.set()
                throw error
            }
            stop.set()
            #expect(try await reads > 0)
            #expect(try await inlineBytes(cluster) < 64 << 10)
            #expect(try await rows(cluster, "SELECT digest FROM contentstore.blobs WHERE pack_id IS NOT NULL").count >= 32)
            #expect(try await onThread { try digests.map { try reader.get($0) } } == blobs)
            #expect(try await onThread { try store.verify(VerificationOptions(readData: true)) }.isClean)
        }
    }

    @Test func putAndExportLeasesHoldOffACollectorWithAShortGracePeriod() async throws {
        var configuration = StoreLocation.configuration
        configuration.garbageGracePeriod = .zero
        try await withClusterStore(configuration: configuration, packSizeTarget: 256 << 10) { store, cluster, directory in
            let file = directory.appendingPathComponent("slow")
            let expected = try writeFile(file, size: 24 << 20, seed: 5)
            let collector = try await StoreLocation(backend: .cluster, cluster: cluster).open(configuration)
            defer { try? collector.close() }
            // Between a put's return and the commit referencing it only the grace period protects
            // a blob, as in the embedded store: the loops use 2 s, far shorter than the put and the
            // export of 24 MiB in 256 KiB packs, but longer than the commit that follows the put.
            let digest = try await collecting(with: collector) { try await onThread { try store.put(contentsOf: file) } }
            try await onThread { try store.write { try $0.setRecord(Record(references: [digest]), forKey: "slow") } }
            let exported = directory.appendingPathComponent("exported")
            try await collecting(with: collector) {
                async let export: Void = onThread { try store.export(digest, to: exported) }
                try await onThread { try store.write { try $0.removeRecord(forKey: "slow") } }
                try await export
            }
            #expect(digest == expected)
            #expect(try hashFile(exported) == expected)
            // Once the leases are gone, the unreferenced blob and all its pieces are collected.
            try await eventually {
                _ = try await onThread { try collector.collectGarbage(GarbageCollectionOptions(gracePeriod: .zero)) }
                let left = try await rows(cluster, "SELECT digest FROM contentstore.blobs")
                guard left.isEmpty else { throw StoreError(code: .io, message: "\(left.count) blobs left") }
            }
        }
    }

    // MARK: - Helpers

    /// Runs `body` while `collector` collects with a 2 s grace period in a loop (at least once) on a thread.
    private func collecting<T: Sendable>(with collector: Store, _ body: () async throws -> T) async throws -> T {
        let stop = StopFlag()
        async let collections: Int = onThread {
            var count = 0
            while !stop.isSet || count == 0 {
                _ = try collector.collectGarbage(GarbageCollectionOptions(gracePeriod: .seconds(2)))
                count += 1
            }
            return count
        }
        do {
            let result = try await body()
            stop.set()
            #expect(try await collections > 0)
            return result
        } catch {
            stop.set()
            throw error
        }
    }

    /// Runs Tests/ClusterWorkload with `arguments` on `cluster`; returns what it printed.
    private func runWorkload(_ arguments: [String], cluster: ClusterConfiguration) async throws -> String {
        let executable = try #require(ClusterInstancesTests.workload, "ClusterWorkload was not found beside the tests")
        let environment = try ClusterTestEnvironment.required()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("workload-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        try #require(FileManager.default.createFile(atPath: output.path, contents: nil))
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.environment = ProcessInfo.processInfo.environment.merging([
            "CONTENTSTORE_TEST_WORKLOAD_DATABASE_URL": cluster.databaseURL,
            "CONTENTSTORE_S3_ENDPOINT": cluster.objectStoreEndpoint.absoluteString,
            "CONTENTSTORE_S3_BUCKET": cluster.bucket,
            "AWS_ACCESS_KEY_ID": environment.accessKeyID,
            "AWS_SECRET_ACCESS_KEY": environment.secretAccessKey,
        ]) { $1 }
        try process.run()
        while process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        try #require(process.terminationStatus == 0, "ClusterWorkload \(arguments.joined(separator: " ")) failed")
        return try String(contentsOf: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static var uncached: Store.Configuration {
        var configuration = StoreLocation.configuration
        configuration.readCacheSize = 0
        return configuration
    }

    /// A cluster store with a database, bucket and scratch directory of its own.
    private func withClusterStore(configuration: Store.Configuration = StoreLocation.configuration, packSizeTarget: Int? = nil,
                                  _ body: (Store, ClusterConfiguration, URL) async throws -> Void) async throws {
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        var cluster = environment.configuration(database: url)
        if let packSizeTarget { cluster.packSizeTarget = packSizeTarget }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cs-chunked-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try await Store(cluster: cluster, configuration: configuration)
            defer { try? store.close() }
            try await body(store, cluster, directory)
        } catch {
            await environment.dropDatabase(url)
            throw error
        }
        await environment.dropDatabase(url)
    }

    /// Writes `size` pseudo-random bytes a MiB at a time; returns their SHA-256.
    private func writeFile(_ file: URL, size: Int, seed: UInt64) throws -> Digest {
        try #require(FileManager.default.createFile(atPath: file.path, contents: nil))
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var generator = SplitMix64(seed: seed)
        var hasher = SHA256.Hasher()
        var written = 0
        while written < size {
            let count = min(1 << 20, size - written)
            let words = (0 ..< (count + 7) / 8).map { _ in generator.next() }
            let piece = words.withUnsafeBytes { Data($0.prefix(count)) }
            piece.withUnsafeBytes { hasher.update($0) }
            try handle.write(contentsOf: piece)
            written += count
        }
        return hasher.finalize()
    }

    private func hashFile(_ file: URL) throws -> Digest {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var hasher = SHA256.Hasher()
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty {
            piece.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.finalize()
    }

    /// The chunks the embedded store's chunker cuts `file` into (default parameters).
    private func chunkDigests(of file: URL) throws -> Set<Digest> {
        let data = try Data(contentsOf: file)
        return try data.withUnsafeBytes { raw in
            var offset = 0
            var digests = Set<Digest>()
            for length in try ChunkingParameters.default.chunkLengths(of: raw) {
                digests.insert(Digest.sha256(UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + length])))
                offset += length
            }
            return digests
        }
    }

    private func rows(_ cluster: ClusterConfiguration, _ sql: String) async throws -> Set<Digest> {
        let environment = try ClusterTestEnvironment.required()
        return try await environment.withClient(cluster.databaseURL) { client in
            var digests = Set<Digest>()
            for try await buffer in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(ByteBuffer.self) {
                digests.insert(try Digest(buffer: buffer, what: "test"))
            }
            return digests
        }
    }

    private func scalar(_ cluster: ClusterConfiguration, _ sql: String) async throws -> Int {
        let environment = try ClusterTestEnvironment.required()
        return try await environment.withClient(cluster.databaseURL) { client in
            for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) { return Int(value) }
            return 0
        }
    }

    private func packBytes(_ cluster: ClusterConfiguration) async throws -> Int {
        try await scalar(cluster, "SELECT coalesce(sum(size), 0)::bigint FROM contentstore.packs")
    }

    private func inlineBytes(_ cluster: ClusterConfiguration) async throws -> Int {
        try await scalar(cluster, "SELECT coalesce(sum(stored_size), 0)::bigint FROM contentstore.blobs WHERE inline_data IS NOT NULL")
    }
}

/// A flag one task sets and another polls.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
