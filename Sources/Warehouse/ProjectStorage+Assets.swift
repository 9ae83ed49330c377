import ContentStore
import Foundation

extension ProjectStorage {
    /// Sets the project asset `name` to `data`, replacing any asset of that name, and sets the
    /// project's modification date, in one commit. The bytes are stored once however many projects
    /// or steps use them; a replaced asset's bytes become garbage once nothing references them.
    /// Asset changes do not notify observers.
    ///
    /// - Throws: ``WarehouseError/invalidArgument(_:)`` for an invalid name;
    ///   ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` for an unknown project
    ///   (`underlying` has code `notFound`) or a failure of the store.
    public func setAsset(_ data: Data, named name: String, inProject id: UUID) throws {
        try AssetName.validate(name, projectID: id)
        try writing(id) {
            _ = try projectRecord(id, in: store.record(forKey: Keys.project(id)))
            var attempt = 0
            while true {
                attempt += 1
                do {
                    let digest = try store.put(data)
                    try changeAssets(of: id) { $0.digests[name] = digest }
                    return
                } catch let error as StoreError where error.code == .missingBlob && attempt < 3 {
                    continue
                }
            }
        }
    }

    /// The bytes of the project asset `name`.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)`` for an unknown project
    ///   or asset (`underlying` has code `notFound`) or unreadable bytes (`corrupted`).
    public func asset(named name: String, inProject id: UUID) throws -> Data {
        do {
            return try store.readLatest { view in
                let assets = try projectAssets(id, in: view)
                guard let digest = assets.digests[name] else {
                    throw StoreError(code: .notFound, message: "project \(id.uuidString) has no asset \"\(AssetName.describe(name))\"")
                }
                return try view.get(digest)
            }
        } catch {
            throw WarehouseError.fetchFailed(projectID: id, stepID: nil, underlying: error)
        }
    }

    /// Removes the project asset `name` and sets the project's modification date, in one commit.
    ///
    /// - Throws: ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` for an unknown project
    ///   or asset (`underlying` has code `notFound`) or a failure of the store.
    public func removeAsset(named name: String, fromProject id: UUID) throws {
        try writing(id) {
            try changeAssets(of: id) { assets in
                guard assets.digests.removeValue(forKey: name) != nil else {
                    throw StoreError(code: .notFound, message: "project \(id.uuidString) has no asset \"\(AssetName.describe(name))\"")
                }
            }
        }
    }

    /// The names of the project's assets, in ascending order of their UTF-8 bytes.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)``; for an unknown
    ///   project `underlying` has code `notFound`.
    public func assetNames(inProject id: UUID) throws -> [String] {
        do {
            return try store.readLatest { try projectAssets(id, in: $0).sortedNames }
        } catch {
            throw WarehouseError.fetchFailed(projectID: id, stepID: nil, underlying: error)
        }
    }

    /// The bytes of the asset `name` of a step of the project.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)`` for an unknown project,
    ///   step or asset (`underlying` has code `notFound`) or unreadable bytes (`corrupted`).
    public func asset(named name: String, inStep stepID: UUID, ofProject id: UUID) throws -> Data {
        do {
            return try store.readLatest { view in
                let step = try stepRecord(stepID, of: id, in: view)
                guard let digest = step.assets.digests[name] else {
                    throw StoreError(code: .notFound, message: "step \(stepID.uuidString) of project \(id.uuidString) has no asset \"\(AssetName.describe(name))\"")
                }
                return try view.get(digest)
            }
        } catch {
            throw WarehouseError.fetchFailed(projectID: id, stepID: stepID, underlying: error)
        }
    }

    /// Writes the project's assets as files under `directory` (created if needed), each at its name
    /// as a relative path, for code that needs files. Each file is written to a temporary file, synced
    /// and renamed into place, replacing a file of the same name. All files come from one consistent
    /// state of the project. Files already in `directory` that are not assets are left alone.
    ///
    /// - Throws: ``WarehouseError/fetchFailed(projectID:stepID:underlying:)`` for an unknown project;
    ///   ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` when a file cannot be written
    ///   (files written before the failure stay).
    public func exportAssets(ofProject id: UUID, to directory: URL) throws {
        let view: Snapshot
        let assets: AssetTable
        do {
            view = try store.makeSnapshot()
            assets = try projectAssets(id, in: view)
        } catch {
            throw WarehouseError.fetchFailed(projectID: id, stepID: nil, underlying: error)
        }
        try writing(id) {
            guard directory.isFileURL else {
                throw StoreError(code: .invalidArgument, message: "the export directory \(directory) is not a file URL")
            }
            let manager = FileManager.default
            try manager.createDirectory(at: directory, withIntermediateDirectories: true)
            // Every name is a relative path without `..` (checked when the table was read), so each
            // file lands inside `directory`.
            for name in assets.sortedNames {
                let file = directory.appendingPathComponent(name, isDirectory: false)
                try manager.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                // The snapshot keeps the blob from collection while it is exported.
                try withExtendedLifetime(view) { try store.export(assets.digests[name]!, to: file) }
            }
        }
    }

    // MARK: Helpers

    /// The project's assets (empty when it has none); `notFound` for an unknown project.
    func projectAssets(_ id: UUID, in view: Snapshot) throws -> AssetTable {
        guard let record = try view.record(forKey: Keys.assets(id)) else {
            _ = try projectRecord(id, in: view.record(forKey: Keys.project(id)))
            return AssetTable()
        }
        return try ProjectAssetsRecord(record).assets
    }

    /// Changes the project's asset table and modification date in one commit.
    private func changeAssets(of id: UUID, _ change: (inout AssetTable) throws -> Void) throws {
        let date = now
        try store.write { transaction in
            var project = try ProjectRecord(try projectRecord(id, in: transaction.record(forKey: Keys.project(id))))
            var assets = try transaction.record(forKey: Keys.assets(id)).map { try ProjectAssetsRecord($0).assets } ?? AssetTable()
            try change(&assets)
            project.modificationDate = date
            try transaction.setRecord(project.record, forKey: Keys.project(id))
            if assets.digests.isEmpty {
                try transaction.removeRecord(forKey: Keys.assets(id))
            } else {
                try transaction.setRecord(ProjectAssetsRecord(assets: assets).record, forKey: Keys.assets(id))
            }
        }
    }
}
