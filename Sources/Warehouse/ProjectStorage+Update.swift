import ContentStore
import Foundation

extension ProjectStorage {
    /// Applies `request` to its project as **one** atomic, durable commit, and sets the project's
    /// modification date to now.
    ///
    /// In order: the new steps are inserted at the *old* cursor, in array order, with fresh IDs;
    /// then the steps in ``ProjectUpdateRequest/stepIDsToDelete`` are removed (IDs not in the project
    /// are ignored); then the cursor is set if the request gives one; then the user data if the
    /// request gives it. The resulting cursor must be between 0 and the resulting number of steps.
    ///
    /// The step contents' user data and assets are stored as blobs before the commit (identical
    /// bytes are stored once). Assets read from an ``StepContent/assetsSourceURL`` directory are
    /// imported and the directory is removed once the update has succeeded. Observers hear
    /// `updated` once the commit is durable.
    ///
    /// Nothing changes when this throws:
    /// - ``WarehouseError/invalidArgument(_:)`` for an invalid asset name or cursor;
    /// - ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` for an unknown project
    ///   (`underlying` has code `notFound`), an assets source that is not a readable directory, or a
    ///   failure of the store. Blobs already stored for the failed update are unreferenced and
    ///   collected after the store's grace period.
    public func update(_ request: ProjectUpdateRequest) throws {
        let id = request.projectID
        try writing(id) {
            // Everything that can be checked without storing anything is checked first. A request
            // that stores nothing (an undo, a redo) is checked only in the transaction, which reads
            // the project anyway.
            for content in request.stepsContentToAdd {
                for name in content.assets.keys { try AssetName.validate(name, projectID: id) }
            }
            if !request.stepsContentToAdd.isEmpty || !(request.userData?.isEmpty ?? true) {
                let current = try ProjectRecord(try projectRecord(id, in: store.record(forKey: Keys.project(id))))
                try validateCursor(of: request, against: current)
            }
            let steps = try request.stepsContentToAdd.map { try gather($0, projectID: id) }

            // A concurrent collection with a zero grace period may remove a blob between its put
            // and the commit (`missingBlob`); putting again and retrying is then correct.
            var attempt = 0
            while true {
                attempt += 1
                do {
                    let stored = try steps.map { try store($0) }
                    let userData = try request.userData.flatMap { $0.isEmpty ? nil : try store.put($0) }
                    try commit(request, steps: stored, userData: userData)
                    break
                } catch let error as StoreError where error.code == .missingBlob && attempt < 3 {
                    continue
                }
            }
        }
        for url in Set(request.stepsContentToAdd.compactMap(\.assetsSourceURL)) {
            try? FileManager.default.removeItem(at: url)
        }
        notifier.post(.updated(id), from: self)
    }

    /// Checks the request's cursor against the project as it is now, before anything is stored.
    private func validateCursor(of request: ProjectUpdateRequest, against project: ProjectRecord) throws {
        let deleting = Set(request.stepIDsToDelete)
        let remaining = project.stepIDs.count(where: { !deleting.contains($0) }) + request.stepsContentToAdd.count
        try ProjectStorage.checkCursor(request.stepCursor ?? project.stepCursor, stepCount: remaining, projectID: request.projectID)
    }

    /// `invalidArgument` unless `0 <= cursor <= stepCount`.
    private static func checkCursor(_ cursor: Int, stepCount: Int, projectID: UUID) throws {
        guard cursor >= 0, cursor <= stepCount else {
            throw WarehouseError.invalidArgument(
                "the step cursor after updating project \(projectID.uuidString) would be \(cursor), "
                    + "outside 0...\(stepCount) (the number of steps after the update)")
        }
    }

    /// Lists the assets of a step to add, from memory and from its source directory.
    private func gather(_ content: StepContent, projectID: UUID) throws -> GatheredStep {
        var assets = content.assets.mapValues(AssetSource.data)
        if let source = content.assetsSourceURL {
            let files: [String: URL]
            do {
                files = try AssetDirectory.files(under: source)
            } catch {
                throw WarehouseError.writeFailed(projectID: projectID, stepID: nil, underlying: error)
            }
            for (name, url) in files {
                try AssetName.validate(name, projectID: projectID)
                guard assets[name] == nil else {
                    throw WarehouseError.invalidArgument(
                        "asset \"\(AssetName.describe(name))\" of a step added to project \(projectID.uuidString) is given both in memory and in \(source.path)")
                }
                assets[name] = .file(url)
            }
        }
        return GatheredStep(userData: content.userData, assets: assets)
    }

    /// Stores a step's user data and assets as blobs.
    private func store(_ step: GatheredStep) throws -> StepRecord {
        var table = AssetTable()
        table.digests.reserveCapacity(step.assets.count)
        for (name, source) in step.assets { table.digests[name] = try source.put(into: store) }
        let userData = step.userData.isEmpty ? nil : try store.put(step.userData)
        return StepRecord(userData: userData, assets: table)
    }

    private func commit(_ request: ProjectUpdateRequest, steps: [StepRecord], userData: Digest?) throws {
        let id = request.projectID
        let date = now
        // Once, not per use: `uuidString` costs about as much as decoding a hundred step IDs.
        let key = Keys.project(id)
        try store.write { transaction in
            let stored = try projectRecord(id, in: transaction.record(forKey: key))
            guard !steps.isEmpty || !request.stepIDsToDelete.isEmpty else {
                // The step list stays as it is: an undo or redo copies its bytes without decoding them.
                var project = try ProjectRecordKeepingSteps(stored)
                try ProjectStorage.finish(request, userData: userData, date: date, on: &project.fields, stepCount: project.stepCount)
                try transaction.setRecord(project.record, forKey: key)
                return
            }
            var project = try ProjectRecord(stored)
            let newIDs = steps.map { _ in UUID() }
            project.stepIDs.insert(contentsOf: newIDs, at: max(0, min(project.stepCursor, project.stepIDs.count)))
            var deleted: [UUID] = []
            if !request.stepIDsToDelete.isEmpty {
                let deleting = Set(request.stepIDsToDelete)
                deleted = project.stepIDs.filter { deleting.contains($0) }
                project.stepIDs.removeAll { deleting.contains($0) }
            }
            try ProjectStorage.finish(request, userData: userData, date: date, on: &project, stepCount: project.stepIDs.count)

            try transaction.setRecord(project.record, forKey: key)
            for (stepID, step) in zip(newIDs, steps) {
                try transaction.setRecord(step.record, forKey: Keys.step(stepID, of: id))
            }
            for stepID in deleted {
                try transaction.removeRecord(forKey: Keys.step(stepID, of: id))
            }
        }
    }

    /// Sets the request's cursor, user data (its digest, `userData`) and `date` on `project`, whose
    /// steps it has already inserted and deleted, leaving `stepCount` steps. The cursor is checked
    /// here in any case: the project may have changed since the check before storing blobs, and a
    /// request that stores nothing is checked only here.
    private static func finish(
        _ request: ProjectUpdateRequest, userData: Digest?, date: Date, on project: inout ProjectRecord, stepCount: Int
    ) throws {
        try checkCursor(request.stepCursor ?? project.stepCursor, stepCount: stepCount, projectID: request.projectID)
        if let cursor = request.stepCursor { project.stepCursor = cursor }
        if request.userData != nil { project.userData = userData }
        project.modificationDate = date
    }

}
