import BenchSupport
import ContentStore
import Foundation
import Synchronization

/// A file per key, as DataArchive did: every object and every record is its own file, written to
/// a temporary name, `fsync`ed, and renamed into place. Blobs live at `objects/xx/<hex digest>` as
/// a 1-byte flag (0 raw, 1 zstd) and the stored bytes; the ingest manifest is one file replaced
/// the same way; records are `records/<hex of the key's SHA-256>`.
final class FilePerKeyContender: Contender {
    let name = "file-per-key"
    let root: String
    private let temporaryCounter = Atomic<Int>(0)

    init(directory: String) throws {
        root = directory
        for shard in 0 ..< 256 {
            try POSIX.makeDirectory(root + "/objects/" + String(format: "%02x", shard))
        }
        try POSIX.makeDirectory(root + "/records")
        try POSIX.fsyncDirectory(root)
    }

    private var uniqueSuffix: String {
        ".tmp\(temporaryCounter.wrappingAdd(1, ordering: .relaxed).oldValue)"
    }

    private func objectPath(_ hex: String) -> String {
        root + "/objects/" + hex.prefix(2) + "/" + hex
    }

    /// Stores a blob unless present; returns its digest.
    private func store(_ bytes: UnsafeRawBufferPointer, sync: Bool = true) throws -> Digest {
        let digest = Digest.sha256(bytes)
        let path = objectPath(digest.hex)
        if POSIX.exists(path) { return digest }
        var file: [UInt8]
        if let compressed = ZstdCodec.compress(bytes) {
            file = [1]
            file.append(contentsOf: compressed)
        } else {
            file = [0]
            file.append(contentsOf: bytes)
        }
        try file.withUnsafeBytes {
            if sync {
                try POSIX.atomicWrite(path, $0, temporarySuffix: uniqueSuffix)
            } else {
                try POSIX.writeFile(path, $0, sync: false)
            }
        }
        return digest
    }

    private var manifestPath: String { root + "/manifest" }

    private func writeManifest(_ entries: [(String, String)]) throws {
        var text = ""
        for (path, hex) in entries.sorted(by: { $0.0 < $1.0 }) { text += hex + " " + path + "\n" }
        try Array(text.utf8).withUnsafeBytes { try POSIX.atomicWrite(manifestPath, $0, temporarySuffix: uniqueSuffix) }
    }

    private func readManifest() throws -> [(String, String)] {
        guard let bytes = try POSIX.readFile(manifestPath) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map { line in
            let hex = line.prefix(64)
            return (String(line.dropFirst(65)), String(hex))
        }
    }

    func ingest(_ corpus: Corpus, threads: Int) throws {
        let queue = WorkQueue(count: corpus.files.count)
        let entries = Mutex<[(String, String)]>([])
        try runThreads(threads) { _ in
            var local: [(String, String)] = []
            while let index = queue.next() {
                guard let contents = try POSIX.readFile(corpus.absolutePath(index)) else { continue }
                let digest = try contents.withUnsafeBytes { try self.store($0) }
                local.append((corpus.files[index].path, digest.hex))
            }
            entries.withLock { $0.append(contentsOf: local) }
        }
        try writeManifest(entries.withLock { $0 })
    }

    /// Rewrites the manifest without `paths`, then deletes every object it no longer names
    /// (a scan of the object directories: the scheme keeps no reference counts).
    func deleteAndCollect(_ paths: [String], diskUsage: () -> UInt64) throws -> [CollectStep] {
        let seconds = try measureSeconds {
            let removed = Set(paths)
            let kept = try readManifest().filter { !removed.contains($0.0) }
            try writeManifest(kept)
            let live = Set(kept.map(\.1))
            for shard in 0 ..< 256 {
                let directory = root + "/objects/" + String(format: "%02x", shard)
                var changed = false
                for name in try FileManager.default.contentsOfDirectory(atPath: directory) where !live.contains(name) {
                    try POSIX.unlink(directory + "/" + name)
                    changed = true
                }
                if changed { try POSIX.fsyncDirectory(directory) }
            }
        }
        return [CollectStep(name: "delete + scan + unlink", seconds: seconds, diskBytesAfter: diskUsage())]
    }

    func commit(key: String, value: Data) throws {
        let path = root + "/records/" + Digest.sha256(Data(key.utf8)).hex
        try value.withUnsafeBytes { try POSIX.atomicWrite(path, $0, temporarySuffix: uniqueSuffix) }
    }

    /// Setup only: written without per-file fsync, synced once at the end.
    func put(_ block: [UInt8]) throws -> Digest {
        try block.withUnsafeBytes { try store($0, sync: false) }
    }

    func finishPuts() throws { sync() }

    func read(_ digest: Digest) throws -> Int {
        guard let file = try POSIX.readFile(objectPath(digest.hex)), let flag = file.first else {
            throw VerificationFailed(description: "file-per-key: blob \(digest) missing")
        }
        // The raw length is not stored; zstd frames carry it.
        let payload = Data(file[1...])
        let rawLength = flag == 1 ? ZstdCodec.frameContentSize(payload) : payload.count
        return try verifiedLength(payload, rawLength: rawLength, compressed: flag == 1, digest: digest)
    }

    func close() throws {}
}
