import BenchSupport
import ContentStore
import DataArchive
import Foundation

/// Issue 5's workload: set, get and archiveCurrent of 1 KiB and 1 MiB values over 64 keys,
/// ContentStore's DataArchive (async API, and callback API waiting for each completion; and
/// fire-and-forget sets followed by a barrier) against the original's file-per-key scheme made
/// durable (``FilePerKeyArchive``); plus the bytes 100 versions with 10 distinct contents occupy.
/// Issue 19 adds 1 MiB values that do not compress, and the same set and get through `Store`
/// itself (``StoreValueClient``), so the engine's large-value path is measured without the facade.
struct ArchiveWorkload {
    static let group = "DataArchive (issue 5)"
    static let allSizes = [(label: "1 KiB", bytes: 1 << 10, random: false), (label: "1 MiB", bytes: 1 << 20, random: false),
                           (label: "1 MiB random", bytes: 1 << 20, random: true)]
    /// The row label of each way ContentStore is driven: DataArchive's two APIs, then `Store` (and
    /// its gets with `verifiesReads` off).
    static let apis = [DataArchiveClient.API.async.rawValue, DataArchiveClient.API.callback.rawValue, StoreValueClient.api,
                       StoreValueClient.unverifiedAPI]

    /// The value sizes this run measures (`--archive-sizes`; all by default).
    let sizes: [(label: String, bytes: Int, random: Bool)]
    /// 64 keys per value size, so a get always finds a value of its size.
    static func keys(_ size: String) -> [String] { (0 ..< 64).map { "doc-\(size.replacingOccurrences(of: " ", with: ""))-\($0)" } }

    let seconds: Double
    private let store: Store?
    /// The store ``StoreValueClient`` sets and gets values in, apart from DataArchive's.
    private let valueStore: Store?
    /// The store of ``StoreValueClient/unverifiedAPI``: `verifiesReads` off.
    private let unverifiedStore: Store?
    private let clients: [any ArchiveClient]
    /// The rows by ID (``rowID(_:_:_:)``), in report order.
    private var rows: [String: Measurement] = [:]
    private var rowOrder: [String] = []
    private(set) var storage: [Measurement] = []

    init(options: Options) throws {
        seconds = options.archiveSeconds
        sizes = Self.allSizes.filter { options.archiveSizes?.names.contains($0.label.replacingOccurrences(of: " ", with: "").lowercased()) ?? true }
        var clients: [any ArchiveClient] = []
        if options.includes(contender: Name.contentStore) {
            var configuration = Store.Configuration()
            configuration.logger.logLevel = .warning
            let store = try Store(at: URL(fileURLWithPath: try POSIX.scratchDirectory("compare/archive-contentstore")), configuration: configuration)
            let archive = DataArchive(store: store)
            clients += [DataArchiveClient(archive: archive, api: .async), DataArchiveClient(archive: archive, api: .callback)]
            self.store = store
            let valueStore = try Store(at: URL(fileURLWithPath: try POSIX.scratchDirectory("compare/archive-store")), configuration: configuration)
            clients.append(StoreValueClient(store: valueStore))
            self.valueStore = valueStore
            var unverified = configuration
            unverified.verifiesReads = false
            let unverifiedStore = try Store(at: URL(fileURLWithPath: try POSIX.scratchDirectory("compare/archive-store-unverified")),
                                            configuration: unverified)
            clients.append(StoreValueClient(store: unverifiedStore, api: StoreValueClient.unverifiedAPI))
            self.unverifiedStore = unverifiedStore
        } else {
            store = nil
            valueStore = nil
            unverifiedStore = nil
        }
        if options.includes(contender: Name.filePerKey) {
            clients.append(try FilePerKeyArchive(directory: try POSIX.scratchDirectory("compare/archive-files")))
        }
        self.clients = clients
        for size in sizes {
            for operation in ArchiveOperation.allCases {
                for api in Self.apis where !api.hasPrefix(StoreValueClient.api) || StoreValueClient.operations(api).contains(operation) {
                    let id = Self.rowID(operation, size.label, api)
                    let what = switch api {
                    case DataArchiveClient.API.async.rawValue: "DataArchive \(operation.rawValue) \(size.label) (async API)"
                    case DataArchiveClient.API.callback.rawValue: "DataArchive \(operation.rawValue) \(size.label) (callback API, waiting for each completion)"
                    case StoreValueClient.unverifiedAPI: "Store \(operation.rawValue) \(size.label), verifiesReads = false (record + get)"
                    default: "Store \(operation.rawValue) \(size.label) (put + write of a record referencing it; record + get)"
                    }
                    rows[id] = Measurement(id: id, workload: what, unit: "ops/s", higherIsBetter: true, group: Self.group)
                    rowOrder.append(id)
                }
            }
            let id = Self.rowID(.set, size.label, "fire-and-forget")
            rows[id] = Measurement(id: id, workload: "DataArchive set \(size.label) (fire-and-forget, then a barrier)", unit: "ops/s",
                                   higherIsBetter: true, group: Self.group)
            rowOrder.append(id)
        }
        // Every key gets a value first (not timed), so the gets never miss.
        for (index, size) in Self.allSizes.enumerated() where sizes.contains(where: { $0.label == size.label }) {
            for client in clients where client.rowAPI != DataArchiveClient.API.async.rawValue {
                let keys = Self.keys(size.label)
                try client.fireAndForget(values: ArchiveValues(size: size.bytes, seed: UInt64(1000 + index), random: size.random), keys: keys,
                                         count: keys.count)
            }
        }
        storage = try Self.measureStorage(options: options)
        sync()  // the timed runs must not pay for the set-up's write-back
    }

    static func rowID(_ operation: ArchiveOperation, _ size: String, _ api: String) -> String {
        "da-\(operation.rawValue)-\(size.replacingOccurrences(of: " ", with: ""))-\(api)"
    }

    var measurements: [Measurement] {
        rowOrder.map { rows[$0]! } + storage
    }

    mutating func run(round: Int, label: String) throws {
        for (index, size) in Self.allSizes.enumerated() where sizes.contains(where: { $0.label == size.label }) {
            let keys = Self.keys(size.label)
            let values = ArchiveValues(size: size.bytes, seed: UInt64(round * 10 + index), random: size.random)
            var setRates: [String: Double] = [:]
            var summary: [String] = []
            for client in rotated(clients, by: round) {
                let api = client.rowAPI
                // Warm-up, not timed: the first writes after a pause run slower (measured: about half speed).
                _ = try client.run(.set, values: values, keys: keys, deadline: monotonicNanoseconds() + UInt64(seconds * 0.25e9))
                for operation in ArchiveOperation.allCases where client.supports(operation) {
                    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
                    var count = 0
                    let elapsed = try measureSeconds { count = try client.run(operation, values: values, keys: keys, deadline: deadline) }
                    let rate = Double(count) / elapsed
                    // The baseline has one waiting mode: its figure stands against both of ContentStore's APIs.
                    for rowAPI in api.map({ [$0] }) ?? Self.apis {
                        rows[Self.rowID(operation, size.label, rowAPI)]?.record(client.contender, round: round, rate)
                    }
                    if operation == .set && api?.hasPrefix(StoreValueClient.api) != true { setRates[client.contender] = max(setRates[client.contender] ?? 0, rate) }
                    summary.append(String(format: "%@%@ %@ %.0f/s", client.contender, api.map { " (\($0))" } ?? "", operation.rawValue, rate))
                }
                sync()
            }
            // Fire-and-forget: about `seconds` worth of sets at the rate this contender just waited for them.
            let cap = size.bytes >= 1 << 20 ? 256 : 20_000
            for client in rotated(clients.filter { $0.rowAPI == nil || $0.rowAPI == DataArchiveClient.API.callback.rawValue }, by: round) {
                let count = min(cap, max(keys.count, Int((setRates[client.contender] ?? 0) * seconds)))
                let elapsed = try measureSeconds { try client.fireAndForget(values: values, keys: keys, count: count) }
                rows[Self.rowID(.set, size.label, "fire-and-forget")]!.record(client.contender, round: round, Double(count) / elapsed)
                summary.append(String(format: "%@ fire-and-forget %d sets %.0f/s", client.contender, count, Double(count) / elapsed))
                sync()
            }
            Progress.log("\(label): DataArchive \(size.label): " + summary.joined(separator: ", "))
        }
    }

    /// `archiveVersions` archiveCurrent calls on one key cycling through 10 distinct 1 MiB contents
    /// (random, so compression plays no part): the bytes on disk, also in versions' worth (once per run).
    private static func measureStorage(options: Options) throws -> [Measurement] {
        let versionBytes = 1 << 20
        var bytes = Measurement(id: "da-storage", workload: "DataArchive: \(options.archiveVersions) versions of 1 MiB, 10 distinct contents, on disk",
                                unit: "MB", higherIsBetter: false, group: group)
        var versions = Measurement(id: "da-storage-versions", workload: "… the same in versions' bytes (1 MiB each)", unit: "versions",
                                   higherIsBetter: false, group: group)
        bytes.limitNote = "10 versions' bytes: every distinct content once"
        versions.limitNote = bytes.limitNote
        bytes.note = "disk usage of the whole store directory (ContentStore: packs, WAL and checkpoint) or of the key directories"
        var random = DeterministicRandom(seed: 55)
        let contents: [Data] = (0 ..< 10).map { _ in
            var data = Data(count: versionBytes)
            data.withUnsafeMutableBytes { random.fill($0) }
            return data
        }
        if options.includes(contender: Name.contentStore) {
            let directory = try POSIX.scratchDirectory("compare/archive-storage-contentstore")
            var configuration = Store.Configuration()
            configuration.logger.logLevel = .warning
            let store = try Store(at: URL(fileURLWithPath: directory), configuration: configuration)
            let archive = DataArchive(store: store)
            try awaitBlocking {
                for index in 0 ..< options.archiveVersions { try await archive.archiveCurrent(andSet: contents[index % 10], forKey: "document") }
            }
            try store.close()
            bytes.record(Name.contentStore, round: 0, Double(POSIX.diskUsage(directory)) / 1e6)
            POSIX.removeTree(directory)
        }
        if options.includes(contender: Name.filePerKey) {
            let directory = try POSIX.scratchDirectory("compare/archive-storage-files")
            let files = try FilePerKeyArchive(directory: directory)
            for index in 0 ..< options.archiveVersions { try files.archiveCurrent(contents[index % 10], forKey: "document") }
            bytes.record(Name.filePerKey, round: 0, Double(POSIX.diskUsage(directory)) / 1e6)
            POSIX.removeTree(directory)
        }
        bytes.recordLimit(round: 0, Double(10 * versionBytes) / 1e6)
        versions.recordLimit(round: 0, 10)
        for (name, values) in bytes.rounds {
            if let value = values.first ?? nil { versions.record(name, round: 0, value * 1e6 / Double(versionBytes)) }
        }
        Progress.log(String(format: "DataArchive storage of %d versions (10 distinct): %@", options.archiveVersions,
                            bytes.rounds.map { String(format: "%@ %.1f MB", $0.key, ($0.value.first ?? 0) ?? 0) }.joined(separator: ", ")))
        return [bytes, versions]
    }

    func close() throws {
        try store?.close()
        try valueStore?.close()
        try unverifiedStore?.close()
    }
}
