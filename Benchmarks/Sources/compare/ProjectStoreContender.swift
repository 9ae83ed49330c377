import BenchSupport
import ContentStore
import Foundation
import Warehouse

/// A store of Warehouse projects under comparison (issue 4). Every operation is durable when it
/// returns. Different projects may be used from different threads at once; one project from one
/// thread at a time (the original's storage was not thread-safe even for that).
protocol ProjectStoreContender: AnyObject, Sendable {
    var name: String { get }
    /// A new empty project whose user data is `userData` (setup, not timed).
    func createProject(userData: Data) throws -> UUID
    /// Fetches the step IDs, then adds a step at the cursor (dropping the steps after it).
    func addStep(to project: UUID, content: StepContent) throws
    /// Fetches the step IDs, then moves the cursor one step back.
    func undo(_ project: UUID) throws
    /// Fetches the step IDs, then moves the cursor one step forward.
    func redo(_ project: UUID) throws
    /// A snapshot with step IDs and user data; returns the number of steps (so nothing is optimised away).
    func fetchSnapshot(_ project: UUID) throws -> Int
    /// A project asset (setup, not timed).
    func setAsset(_ data: Data, named name: String, in project: UUID) throws
    func duplicate(_ project: UUID) throws -> UUID
    /// Cleanup between rounds (not timed).
    func deleteProject(_ project: UUID) throws
    func close() throws
}

/// Warehouse's `ProjectStorage` over a ContentStore with its default configuration (durability `.full`).
final class WarehouseContender: ProjectStoreContender {
    let name = Name.contentStore
    let store: Store
    let storage: ProjectStorage

    init(directory: String) throws {
        var configuration = Store.Configuration()
        configuration.logger.logLevel = .warning
        store = try Store(at: URL(fileURLWithPath: directory), configuration: configuration)
        storage = ProjectStorage(store: store, bundleID: "compare")
    }

    func createProject(userData: Data) throws -> UUID {
        let project = try storage.createProject()
        var request = ProjectUpdateRequest(projectID: project)
        request.userData = userData
        try storage.update(request)
        return project
    }

    func addStep(to project: UUID, content: StepContent) throws {
        try update(project) { ProjectUpdateRequest.addStep($0, content: content) }
    }

    func undo(_ project: UUID) throws { try update(project, ProjectUpdateRequest.undo) }
    func redo(_ project: UUID) throws { try update(project, ProjectUpdateRequest.redo) }

    private func update(_ project: UUID, _ request: (ProjectSnapshot) -> ProjectUpdateRequest?) throws {
        let snapshot = try storage.fetchSnapshot(ofProject: project, options: .stepIDs)
        guard let request = request(snapshot) else {
            throw VerificationFailed(description: "Warehouse: no such request at cursor \(snapshot.stepCursor)")
        }
        try storage.update(request)
    }

    func fetchSnapshot(_ project: UUID) throws -> Int {
        try storage.fetchSnapshot(ofProject: project, options: .all).stepIDs?.count ?? 0
    }

    func setAsset(_ data: Data, named name: String, in project: UUID) throws {
        try storage.setAsset(data, named: name, inProject: project)
    }

    func duplicate(_ project: UUID) throws -> UUID { try storage.duplicateProject(project) }
    func deleteProject(_ project: UUID) throws { try storage.deleteProject(project) }
    func close() throws { try store.close() }
}
