import BenchSupport
import ContentStore
import DataArchive
import Foundation
import Synchronization

/// A DataArchive operation of the issue 5 workload.
enum ArchiveOperation: String, CaseIterable {
    case set, get, archiveCurrent
}

/// One way of driving a versioned-document store (issue 5). `run` performs `operation` on the
/// keys in turn, each call durable (writes) and complete before the next starts, until `deadline`;
/// `fireAndForget` queues `count` sets without waiting, then waits for all of them.
protocol ArchiveClient: AnyObject, Sendable {
    /// The report column (contender) this client's figures go to.
    var contender: String { get }
    /// The rows this client's figures go to: the ContentStore API it drives, or nil for a baseline,
    /// whose figure stands against every one of them.
    var rowAPI: String? { get }
    func supports(_ operation: ArchiveOperation) -> Bool
    func run(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int
    func fireAndForget(values: ArchiveValues, keys: [String], count: Int) throws
}

extension ArchiveClient {
    func supports(_ operation: ArchiveOperation) -> Bool { true }
}

/// Values of one size, each one distinct (its first 8 bytes a counter, shared by every run that
/// draws from it), as edited documents are: no value is ever stored twice, so nothing dedups.
/// Text, or with `random` bytes that do not compress (media, encrypted or compressed documents).
final class ArchiveValues: Sendable {
    let base: Data
    private let counter: Atomic<UInt64>

    init(size: Int, seed: UInt64, random: Bool = false) {
        if random {
            var generator = DeterministicRandom(seed: seed)
            var bytes = Data(count: size)
            bytes.withUnsafeMutableBytes { generator.fill($0) }
            base = bytes
        } else {
            var generator = ContentGenerator(seed: seed)
            base = Data(generator.textBlock(size: size))
        }
        counter = Atomic(seed &* 0x9E37_79B9_7F4A_7C15 &+ monotonicNanoseconds())
    }

    func next() -> Data {
        let tag = counter.add(1, ordering: .relaxed).newValue
        var value = base
        value.withUnsafeMutableBytes { $0.storeBytes(of: tag, as: UInt64.self) }
        return value
    }
}

/// Runs an async body to completion from a plain thread (the timed loop runs inside one task, so
/// the async API is measured as an async caller uses it).
func awaitBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// The first failure reported to a completion handler, rethrown once the caller has waited.
final class FirstFailure: Sendable {
    private let failure = Mutex<String?>(nil)
    func note(_ result: DataArchiveResult, _ context: String) {
        guard !result.isSuccess else { return }
        failure.withLock { if $0 == nil { $0 = "\(context): \(result)" } }
    }
    func check() throws {
        if let message = failure.withLock({ $0 }) { throw VerificationFailed(description: message) }
    }
}

/// ContentStore's DataArchive (default store configuration, durability `.full`), through either API.
final class DataArchiveClient: ArchiveClient {
    enum API: String { case async, callback }
    let contender = Name.contentStore
    let archive: DataArchive
    let api: API
    var rowAPI: String? { api.rawValue }

    init(archive: DataArchive, api: API) {
        self.archive = archive
        self.api = api
    }

    func run(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int {
        switch api {
        case .async: try runAsync(operation, values: values, keys: keys, deadline: deadline)
        case .callback: try runCallbacks(operation, values: values, keys: keys, deadline: deadline)
        }
    }

    private func runAsync(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int {
        let archive = archive
        return try awaitBlocking {
            var count = 0
            while monotonicNanoseconds() < deadline {
                let key = keys[count % keys.count]
                switch operation {
                case .set: try await archive.set(values.next(), forKey: key)
                case .archiveCurrent: try await archive.archiveCurrent(andSet: values.next(), forKey: key)
                case .get:
                    guard try await archive.data(forKey: key) != nil else { throw VerificationFailed(description: "DataArchive: \(key) has no value") }
                }
                count += 1
            }
            return count
        }
    }

    /// The original API: each call's completion handler is waited for before the next call.
    private func runCallbacks(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int {
        var count = 0
        let failure = FirstFailure()
        let done = DispatchSemaphore(value: 0)
        while monotonicNanoseconds() < deadline {
            let key = keys[count % keys.count]
            switch operation {
            case .set: archive.set(key: key, data: values.next()) { failure.note($0, key); done.signal() }
            case .archiveCurrent: archive.archiveCurrent(key: key, andSetNewData: values.next()) { failure.note($0, key); done.signal() }
            case .get:
                archive.get(key: key) { data, result in
                    failure.note(data == nil && result.isSuccess ? .fileNotFound(URL(fileURLWithPath: key)) : result, key)
                    done.signal()
                }
            }
            done.wait()
            try failure.check()
            count += 1
        }
        return count
    }

    /// Fire-and-forget `set`s (no completion handler), then a `get` of every key with a handler:
    /// per key, operations run in call order, so when the gets have answered every set is durable.
    func fireAndForget(values: ArchiveValues, keys: [String], count: Int) throws {
        for index in 0 ..< count { archive.set(key: keys[index % keys.count], data: values.next()) }
        let failure = FirstFailure()
        let group = DispatchGroup()
        for key in keys {
            group.enter()
            archive.get(key: key) { _, result in failure.note(result, key); group.leave() }
        }
        group.wait()
        try failure.check()
    }
}

/// mzaks' DataArchive scheme, made durable: a directory per key under `<root>/data_archive/`, the
/// current value in `0.dat`, archived versions in `1.dat`, `2.dat`, … (oldest first). `set`
/// renames `0.dat` to `0.tmp`, writes the new `0.dat`, deletes `0.tmp`; `archiveCurrent` counts the
/// archives (a directory listing, as the original's `numberOfArchives`), renames `0.dat` to the
/// next number and writes the new `0.dat`. Durability as the original lacked it: the new file is
/// `fsync`ed and the key's directory `fsync`ed before the call returns (a new key's directory also
/// in its parent). Waiting calls run on the caller's thread (the original hopped through the main
/// queue and a per-key queue first); fire-and-forget calls go to a serial queue per key, as the
/// original's did.
final class FilePerKeyArchive: ArchiveClient {
    let contender = Name.filePerKey
    let rowAPI: String? = nil
    let root: String
    private let knownKeys = Mutex<Set<String>>([])
    private let queues = Mutex<[String: DispatchQueue]>([:])

    init(directory: String) throws {
        root = directory + "/data_archive"
        try POSIX.makeDirectory(root)
        try POSIX.fsyncDirectory(directory)
    }

    private func folder(_ key: String) throws -> String {
        let path = root + "/" + key
        if knownKeys.withLock({ $0.contains(path) }) { return path }
        if !POSIX.exists(path) {
            try POSIX.makeDirectory(path, intermediates: false)
            try POSIX.fsyncDirectory(root)
        }
        knownKeys.withLock { _ = $0.insert(path) }
        return path
    }

    func set(_ data: Data, forKey key: String) throws {
        let folder = try folder(key)
        let current = folder + "/0.dat", temporary = folder + "/0.tmp"
        let moved = rename(current, temporary) == 0
        try data.withUnsafeBytes { try POSIX.writeFile(current, $0, sync: true) }
        if moved { try POSIX.unlink(temporary) }
        try POSIX.fsyncDirectory(folder)
    }

    func archiveCurrent(_ data: Data, forKey key: String) throws {
        let folder = try folder(key)
        let current = folder + "/0.dat"
        let archives = try POSIX.directoryEntries(folder)?.filter { $0.hasSuffix(".dat") && !$0.hasPrefix("0") }.count ?? 0
        _ = rename(current, folder + "/\(archives + 1).dat")  // no current value: nothing to archive
        try data.withUnsafeBytes { try POSIX.writeFile(current, $0, sync: true) }
        try POSIX.fsyncDirectory(folder)
    }

    func get(_ key: String) throws -> Data? {
        let folder = root + "/" + key
        return try (POSIX.readFile(folder + "/0.dat") ?? POSIX.readFile(folder + "/0.tmp")).map { Data($0) }
    }

    func run(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int {
        var count = 0
        while monotonicNanoseconds() < deadline {
            let key = keys[count % keys.count]
            switch operation {
            case .set: try set(values.next(), forKey: key)
            case .archiveCurrent: try archiveCurrent(values.next(), forKey: key)
            case .get: guard try get(key) != nil else { throw VerificationFailed(description: "file-per-key: \(key) has no value") }
            }
            count += 1
        }
        return count
    }

    private func queue(_ key: String) -> DispatchQueue {
        queues.withLock { queues in
            if let queue = queues[key] { return queue }
            let queue = DispatchQueue(label: key)
            queues[key] = queue
            return queue
        }
    }

    func fireAndForget(values: ArchiveValues, keys: [String], count: Int) throws {
        let failure = Mutex<(any Error)?>(nil)
        for index in 0 ..< count {
            let key = keys[index % keys.count], value = values.next()
            queue(key).async {
                do { try self.set(value, forKey: key) } catch { failure.withLock { if $0 == nil { $0 = error } } }
            }
        }
        for key in keys { queue(key).sync {} }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}

/// ContentStore's `Store` itself, as a backend keeping a value per key would use it: `set` puts the
/// value as a blob and commits a record referencing it (durable when it returns, as
/// DataArchive's); `get` reads the record and gets its blob (verified, as by default).
final class StoreValueClient: ArchiveClient {
    static let api = "Store"
    /// The same gets on a store opened with `verifiesReads = false` (issue 19: what the contract's
    /// re-hash costs, beside the default).
    static let unverifiedAPI = "Store-unverified"
    /// The operations each of the two drives: the unverified store only gets (its sets are the same).
    static func operations(_ api: String) -> [ArchiveOperation] { api == unverifiedAPI ? [.get] : [.set, .get] }
    let contender = Name.contentStore
    let rowAPI: String?
    let store: Store

    init(store: Store, api: String = StoreValueClient.api) {
        self.store = store
        rowAPI = api
    }

    func supports(_ operation: ArchiveOperation) -> Bool { Self.operations(rowAPI ?? Self.api).contains(operation) }

    func set(_ data: Data, forKey key: String) throws {
        let digest = try store.put(data)
        try store.write { try $0.setRecord(Record(references: [digest]), forKey: key) }
    }

    func get(_ key: String) throws -> Data? {
        guard let digest = try store.record(forKey: key)?.references.first else { return nil }
        return try store.get(digest)
    }

    func run(_ operation: ArchiveOperation, values: ArchiveValues, keys: [String], deadline: UInt64) throws -> Int {
        var count = 0
        while monotonicNanoseconds() < deadline {
            let key = keys[count % keys.count]
            switch operation {
            case .set: try set(values.next(), forKey: key)
            case .get: guard try get(key) != nil else { throw VerificationFailed(description: "Store: \(key) has no value") }
            case .archiveCurrent: throw VerificationFailed(description: "Store: archiveCurrent is DataArchive's")
            }
            count += 1
        }
        return count
    }

    /// Sets `count` values in turn, each durable before the next (the set-up fill).
    func fireAndForget(values: ArchiveValues, keys: [String], count: Int) throws {
        for index in 0 ..< count { try set(values.next(), forKey: keys[index % keys.count]) }
    }
}
