@_exported import ContentStore
import Foundation

/// Persistent storage of projects: ordered steps with a cursor for undo and redo, project and step
/// user data, and named assets, kept as records and blobs in a ``ContentStore/Store``.
///
/// Every change is one atomic, durable commit of the store: after a crash a project is in its
/// state before or after an operation, never between. User data and assets are content-addressed
/// blobs referenced from the project's records, so identical bytes are stored once, duplicating a
/// project copies references rather than bytes, and the store's garbage collection removes what no
/// project references any more.
///
/// Projects are global to the store: every `ProjectStorage` over the same store lists and reads
/// every project, whatever its bundle ID; ``bundleID`` is only recorded in the projects this
/// storage creates. See Docs/warehouse.md for the mapping onto records and blobs.
///
/// `ProjectStorage` is `Sendable`; any number of threads may use it at once. Updates of one project
/// are serialized by the store, each seeing the one before.
public final class ProjectStorage: Sendable {
    /// The store holding the projects.
    public let store: Store
    /// The bundle ID recorded in projects this storage creates.
    public let bundleID: String

    /// Keeps a store opened by ``init(baseURL:bundleID:)`` open while this storage exists.
    private let lease: SharedStores.Lease?
    let notifier = Notifier()

    /// A storage over `store`, which the caller opened and closes. Several storages (and other
    /// facades) may share one store.
    public init(store: Store, bundleID: String) {
        self.store = store
        self.bundleID = bundleID
        self.lease = nil
    }

    private init(lease: SharedStores.Lease, bundleID: String) {
        self.store = lease.store
        self.bundleID = bundleID
        self.lease = lease
    }

    /// A storage over its own store in `baseURL/warehouse`, creating the directories as needed.
    ///
    /// Storages created with the same `baseURL` in one process share one store, which is closed when
    /// the last of them is released. Another process cannot open it meanwhile.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` with the `StoreError`
    ///   (`locked` when another process has the store open, `unsupportedFormat`, `io`, ...) or the
    ///   file system error as `underlying`.
    public convenience init(baseURL: URL, bundleID: String) throws {
        let lease: SharedStores.Lease
        do {
            guard baseURL.isFileURL else {
                throw StoreError(code: .invalidArgument, message: "the base URL \(baseURL) is not a file URL")
            }
            let directory = ProjectStorage.storeDirectory(in: baseURL)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            lease = try SharedStores.acquire(directory: directory)
        } catch {
            throw WarehouseError.writeFailed(projectID: nil, stepID: nil, underlying: error)
        }
        self.init(lease: lease, bundleID: bundleID)
    }

    /// The directory ``init(baseURL:bundleID:)`` keeps its store in: `baseURL/warehouse`.
    public static func storeDirectory(in baseURL: URL) -> URL {
        baseURL.appendingPathComponent("warehouse", isDirectory: true)
    }

    deinit {
        notifier.finish()
    }

    /// The store's clock.
    var now: Date { store.configuration.now() }

    // MARK: Projects

    /// Creates an empty project: no steps, cursor 0, empty user data, both dates now, this storage's
    /// bundle ID. Observers hear `created` once it is durable.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)``.
    public func createProject() throws -> UUID {
        let id = UUID()
        let date = now
        let project = ProjectRecord(creationDate: date, modificationDate: date, stepCursor: 0, bundleID: bundleID, userData: nil, stepIDs: [])
        try writing(id) {
            try store.write { transaction in
                try transaction.setRecord(project.record, forKey: Keys.project(id))
            }
        }
        notifier.post(.created(id), from: self)
        return id
    }

    /// The IDs of every project in the store, ordered by `sortedBy` (ties by ID), oldest first or,
    /// with `descending`, newest first.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)``.
    public func projectIDs(sortedBy property: ProjectSortProperty, descending: Bool) throws -> [UUID] {
        do {
            var entries = try store.readLatest { snapshot -> [(id: UUID, date: Date)] in
                try snapshot.keys(withPrefix: Keys.projectPrefix).compactMap { key in
                    guard let id = Keys.projectID(fromProjectKey: key), let record = try snapshot.record(forKey: key) else { return nil }
                    let project = try ProjectRecord(record, includingSteps: false)
                    return (id, property == .creationDate ? project.creationDate : project.modificationDate)
                }
            }
            entries.sort { lhs, rhs in
                lhs.date != rhs.date ? lhs.date < rhs.date : lhs.id.uuidString < rhs.id.uuidString
            }
            if descending { entries.reverse() }
            return entries.map(\.id)
        } catch {
            throw WarehouseError.fetchFailed(projectID: nil, stepID: nil, underlying: error)
        }
    }

    /// The project's current state. Step IDs and user data are read only when `options` ask for them.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)``; for an unknown project
    ///   `underlying` is a `StoreError` with code `notFound`.
    public func fetchSnapshot(ofProject id: UUID, options: ProjectFetchOptions = []) throws -> ProjectSnapshot {
        do {
            func snapshot(_ project: ProjectRecord, userData: Data?) -> ProjectSnapshot {
                ProjectSnapshot(
                    id: id, bundleID: project.bundleID, creationDate: project.creationDate,
                    modificationDate: project.modificationDate,
                    stepIDs: options.contains(.stepIDs) ? project.stepIDs : nil,
                    stepCursor: project.stepCursor, userData: userData)
            }
            guard options.contains(.userData) else {
                let project = try ProjectRecord(try projectRecord(id, in: store.record(forKey: Keys.project(id))), includingSteps: options.contains(.stepIDs))
                return snapshot(project, userData: nil)
            }
            return try store.readLatest { view in
                let project = try ProjectRecord(try projectRecord(id, in: view.record(forKey: Keys.project(id))), includingSteps: options.contains(.stepIDs))
                return snapshot(project, userData: try project.userData.map { try view.get($0) } ?? Data())
            }
        } catch {
            throw WarehouseError.fetchFailed(projectID: id, stepID: nil, underlying: error)
        }
    }

    /// A step of the project, with its user data and asset names.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)`` when the project is
    ///   unknown or the step is not one of its steps (`underlying` has code `notFound`).
    public func fetchStep(_ stepID: UUID, fromProject projectID: UUID) throws -> Step {
        do {
            return try store.readLatest { view in
                let step = try stepRecord(stepID, of: projectID, in: view)
                let userData = try step.userData.map { try view.get($0) } ?? Data()
                return Step(id: stepID, projectID: projectID, userData: userData, assetNames: step.assets.sortedNames)
            }
        } catch {
            throw WarehouseError.fetchFailed(projectID: projectID, stepID: stepID, underlying: error)
        }
    }

    /// Deletes the project, its steps and its assets in one commit. Blobs nothing else references
    /// become garbage for the store's collection. Observers hear `deleted` once it is durable.
    ///
    /// - Throws: ``WarehouseError/deleteFailed(projectID:underlying:)``; for an unknown project
    ///   `underlying` has code `notFound`.
    public func deleteProject(_ id: UUID) throws {
        do {
            try store.write { transaction in
                _ = try projectRecord(id, in: transaction.record(forKey: Keys.project(id)))
                try transaction.removeRecord(forKey: Keys.project(id))
                try transaction.removeRecord(forKey: Keys.assets(id))
                for key in try transaction.keys(withPrefix: Keys.steps(id)) {
                    try transaction.removeRecord(forKey: key)
                }
            }
        } catch {
            throw WarehouseError.deleteFailed(projectID: id, underlying: error)
        }
        notifier.post(.deleted(id), from: self)
    }

    /// Copies the project to a new one with the same bundle ID, step IDs, cursor, user data, step
    /// contents and assets, and both dates now. Only records are copied: the cost does not depend on
    /// the size of the user data or assets, which the two projects then share until either changes
    /// them. Observers hear `duplicated` once it is durable.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` naming the source.
    public func duplicateProject(_ id: UUID) throws -> UUID {
        let copy = UUID()
        let date = now
        try writing(id) {
            try store.write { transaction in
                var project = try ProjectRecord(try projectRecord(id, in: transaction.record(forKey: Keys.project(id))))
                project.creationDate = date
                project.modificationDate = date
                try transaction.setRecord(project.record, forKey: Keys.project(copy))
                if let assets = try transaction.record(forKey: Keys.assets(id)) {
                    try transaction.setRecord(assets, forKey: Keys.assets(copy))
                }
                let prefix = Keys.steps(id)
                let copyPrefix = Keys.steps(copy)
                for key in try transaction.keys(withPrefix: prefix) {
                    guard let step = try transaction.record(forKey: key) else { continue }
                    try transaction.setRecord(step, forKey: copyPrefix + key.dropFirst(prefix.count))
                }
            }
        }
        notifier.post(.duplicated(source: id, destination: copy), from: self)
        return copy
    }

    /// Sets the project's creation date, for migrating projects from elsewhere. Notifies no one.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)``.
    public func setCreationDate(_ date: Date, ofProject id: UUID) throws {
        try changeProject(id) { $0.creationDate = date }
    }

    /// Sets the project's modification date, for migrating projects from elsewhere. Notifies no one.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)``.
    public func setModificationDate(_ date: Date, ofProject id: UUID) throws {
        try changeProject(id) { $0.modificationDate = date }
    }

    private func changeProject(_ id: UUID, _ change: (inout ProjectRecord) -> Void) throws {
        try writing(id) {
            let key = Keys.project(id)
            try store.write { transaction in
                var project = try ProjectRecordKeepingSteps(try projectRecord(id, in: transaction.record(forKey: key)))
                change(&project.fields)
                try transaction.setRecord(project.record, forKey: key)
            }
        }
    }

    // MARK: Sizes

    /// The logical (uncompressed) bytes of the distinct blobs all projects in the store reference:
    /// user data and assets of projects and steps, each blob counted once however often it is used.
    ///
    /// - Throws: ``WarehouseError/calculateSizeFailed(projectID:underlying:)``.
    public func storageSize() throws -> UInt64 {
        do {
            let digests = try store.readLatest { view in
                var digests = Set<Digest>()
                for key in try view.keys(withPrefix: Keys.root) {
                    if let record = try view.record(forKey: key) { digests.formUnion(record.references) }
                }
                return digests
            }
            return size(of: digests)
        } catch {
            throw WarehouseError.calculateSizeFailed(projectID: nil, underlying: error)
        }
    }

    /// The logical (uncompressed) bytes of the distinct blobs the project references: its user data
    /// and assets and those of its steps, each blob counted once. Writing a new 1000-byte asset grows
    /// it by exactly 1000; blobs shared with other projects count in each of them.
    ///
    /// - Throws: ``WarehouseError/calculateSizeFailed(projectID:underlying:)``; for an unknown
    ///   project `underlying` has code `notFound`.
    public func sizeOfProject(_ id: UUID) throws -> UInt64 {
        do {
            let digests = try store.readLatest { view in
                var digests = Set(try projectRecord(id, in: view.record(forKey: Keys.project(id))).references)
                if let assets = try view.record(forKey: Keys.assets(id)) { digests.formUnion(assets.references) }
                for key in try view.keys(withPrefix: Keys.steps(id)) {
                    if let step = try view.record(forKey: key) { digests.formUnion(step.references) }
                }
                return digests
            }
            return size(of: digests)
        } catch {
            throw WarehouseError.calculateSizeFailed(projectID: id, underlying: error)
        }
    }

    private func size(of digests: Set<Digest>) -> UInt64 {
        digests.reduce(0) { $0 + UInt64(store.info(for: $1)?.size ?? 0) }
    }

    // MARK: Observers

    /// Adds an observer, held weakly. Adding one twice has no further effect.
    public func addObserver(_ observer: any ProjectStorageObserver) {
        notifier.add(observer)
    }

    /// Removes an observer; it is not called after this returns (unless a call is already running
    /// on another thread).
    public func removeObserver(_ observer: any ProjectStorageObserver) {
        notifier.remove(observer)
    }

    /// The events of this storage's successful creates, updates, deletes and duplicates, in the
    /// order they became durable on each thread.
    ///
    /// Each access returns a new stream that receives the events from then on (no history), and
    /// buffers them without limit until they are read; stop iterating (or drop the stream) to
    /// unsubscribe. Streams finish when the storage is released. Changes made through other
    /// storages over the same store are not reported.
    public var events: AsyncStream<ProjectStorageEvent> {
        notifier.makeStream()
    }

    // MARK: Helpers

    /// Runs `body`, wrapping errors other than ``WarehouseError`` as `writeFailed`.
    func writing<T>(_ projectID: UUID?, stepID: UUID? = nil, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as WarehouseError {
            throw error
        } catch {
            throw WarehouseError.writeFailed(projectID: projectID, stepID: stepID, underlying: error)
        }
    }

    /// `record`, or `notFound` naming the project.
    func projectRecord(_ id: UUID, in record: Record?) throws -> Record {
        guard let record else {
            throw StoreError(code: .notFound, message: "project \(id.uuidString) does not exist")
        }
        return record
    }

    func stepRecord(_ stepID: UUID, of projectID: UUID, in view: Snapshot) throws -> StepRecord {
        guard let record = try view.record(forKey: Keys.step(stepID, of: projectID)) else {
            _ = try projectRecord(projectID, in: view.record(forKey: Keys.project(projectID)))
            throw StoreError(code: .notFound, message: "step \(stepID.uuidString) is not in project \(projectID.uuidString)")
        }
        return try StepRecord(record)
    }
}
