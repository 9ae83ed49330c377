import Foundation

/// Which of a project's unbounded properties ``ProjectStorage/fetchSnapshot(ofProject:options:)``
/// reads. Without an option the snapshot's ``ProjectSnapshot/stepIDs`` and
/// ``ProjectSnapshot/userData`` are nil, which keeps the common fetch cheap.
public struct ProjectFetchOptions: OptionSet, Hashable, Sendable {
    /// The option bits.
    public let rawValue: UInt

    /// Creates options from their bits.
    public init(rawValue: UInt) {
        self.rawValue = rawValue
    }

    /// Fetch the ordered list of step IDs.
    public static let stepIDs = ProjectFetchOptions(rawValue: 1 << 0)
    /// Fetch the project's user data.
    public static let userData = ProjectFetchOptions(rawValue: 1 << 1)
    /// Fetch everything: ``stepIDs`` and ``userData``.
    public static let all: ProjectFetchOptions = [.stepIDs, .userData]
}

/// The date ``ProjectStorage/projectIDs(sortedBy:descending:)`` orders projects by.
public enum ProjectSortProperty: Hashable, Sendable {
    /// The date the project was created (or last given by ``ProjectStorage/setCreationDate(_:ofProject:)``).
    case creationDate
    /// The date of the project's last successful update or asset change (or last given by
    /// ``ProjectStorage/setModificationDate(_:ofProject:)``).
    case modificationDate
}

/// The state of a project at the moment it was fetched: a plain value that does not follow later
/// changes. Fetch again after updating.
public struct ProjectSnapshot: Hashable, Sendable {
    /// The project's ID.
    public var id: UUID
    /// The bundle ID of the storage that created the project. Storages opened with another bundle
    /// ID read and keep this one.
    public var bundleID: String
    /// When the project was created.
    public var creationDate: Date
    /// When the project was last updated.
    public var modificationDate: Date
    /// The project's steps in order, or nil when the fetch did not ask for
    /// ``ProjectFetchOptions/stepIDs``.
    public var stepIDs: [UUID]?
    /// The index *after* the current step: 0 when the project is empty or fully undone,
    /// `stepIDs.count` when nothing can be redone.
    public var stepCursor: Int
    /// The project's user data, or nil when the fetch did not ask for
    /// ``ProjectFetchOptions/userData``. A new project's user data is empty.
    public var userData: Data?

    /// Whether a step can be undone: `stepCursor != 0`.
    public var canUndo: Bool { stepCursor != 0 }
    /// Whether a step can be redone: the step IDs were fetched and `stepCursor < stepIDs.count`.
    public var canRedo: Bool {
        guard let stepIDs else { return false }
        return stepCursor < stepIDs.count
    }

    /// Creates a snapshot. Snapshots normally come from ``ProjectStorage/fetchSnapshot(ofProject:options:)``;
    /// this initializer exists for tests and for callers that build requests from saved state.
    public init(
        id: UUID, bundleID: String = "", creationDate: Date = Date(timeIntervalSince1970: 0),
        modificationDate: Date = Date(timeIntervalSince1970: 0), stepIDs: [UUID]? = nil,
        stepCursor: Int = 0, userData: Data? = nil
    ) {
        self.id = id
        self.bundleID = bundleID
        self.creationDate = creationDate
        self.modificationDate = modificationDate
        self.stepIDs = stepIDs
        self.stepCursor = stepCursor
        self.userData = userData
    }
}

/// One step of a project, as fetched by ``ProjectStorage/fetchStep(_:fromProject:)``.
public struct Step: Hashable, Sendable {
    /// The step's ID. A duplicated project keeps its source's step IDs.
    public var id: UUID
    /// The project the step was fetched from.
    public var projectID: UUID
    /// The step's user data (empty when it was added with empty user data).
    public var userData: Data
    /// The names of the step's assets, in ascending order of their UTF-8 bytes. Read one with
    /// ``ProjectStorage/asset(named:inStep:ofProject:)``.
    public var assetNames: [String]

    /// Creates a step value.
    public init(id: UUID, projectID: UUID, userData: Data, assetNames: [String] = []) {
        self.id = id
        self.projectID = projectID
        self.userData = userData
        self.assetNames = assetNames
    }
}

/// The content of a step to add in a ``ProjectUpdateRequest``: user data and named assets.
///
/// Assets come from ``assets`` (in memory), from the regular files under ``assetsSourceURL``
/// (names are their paths relative to it, with `/` between components), or both as long as no name
/// appears twice. Steps are immutable once added.
public struct StepContent: Hashable, Sendable {
    /// The step's user data.
    public var userData: Data
    /// Assets given in memory, by name.
    public var assets: [String: Data]
    /// A directory whose regular files become the step's assets; it is removed after the update
    /// that adds the step succeeds. Symbolic links and other special files in it are ignored.
    public var assetsSourceURL: URL?

    /// Content with in-memory assets.
    public init(userData: Data, assets: [String: Data] = [:]) {
        self.userData = userData
        self.assets = assets
        self.assetsSourceURL = nil
    }

    /// Content whose assets are the regular files under `assetsSourceURL`, recursively, named by
    /// their relative paths. The directory is read during ``ProjectStorage/update(_:)`` and removed
    /// after the update succeeds; when it is not a readable directory the update fails with
    /// ``WarehouseError/writeFailed(projectID:stepID:underlying:)`` and changes nothing.
    public init(userData: Data, assetsSourceURL: URL?) {
        self.userData = userData
        self.assets = [:]
        self.assetsSourceURL = assetsSourceURL
    }
}

/// The changes ``ProjectStorage/update(_:)`` applies to one project, as one atomic commit:
/// new steps are inserted at the *old* cursor (in array order, with fresh IDs), then
/// ``stepIDsToDelete`` are removed (unknown IDs are ignored), then the cursor is set if
/// ``stepCursor`` is given, then the user data if ``userData`` is given.
public struct ProjectUpdateRequest: Hashable, Sendable {
    /// The project to update.
    public private(set) var projectID: UUID
    /// The cursor after the update; nil keeps the current one. It must not exceed the number of
    /// steps after the insertions and deletions.
    public var stepCursor: Int?
    /// Steps to delete. IDs that are not in the project are ignored.
    public var stepIDsToDelete: [UUID]
    /// Steps to add at the project's current cursor, in order.
    public var stepsContentToAdd: [StepContent]
    /// The project's new user data; nil keeps the current one.
    public var userData: Data?

    /// An empty request for `projectID`: applying it changes only the modification date.
    public init(projectID: UUID) {
        self.projectID = projectID
        self.stepCursor = nil
        self.stepIDsToDelete = []
        self.stepsContentToAdd = []
        self.userData = nil
    }

    /// A request that moves the cursor one step back, or nil when `snapshot` cannot undo.
    public static func undo(_ snapshot: ProjectSnapshot) -> ProjectUpdateRequest? {
        guard snapshot.canUndo else { return nil }
        var request = ProjectUpdateRequest(projectID: snapshot.id)
        request.stepCursor = snapshot.stepCursor - 1
        return request
    }

    /// A request that moves the cursor one step forward, or nil when the snapshot has no step IDs or
    /// cannot redo.
    public static func redo(_ snapshot: ProjectSnapshot) -> ProjectUpdateRequest? {
        guard snapshot.stepIDs != nil, snapshot.canRedo else { return nil }
        var request = ProjectUpdateRequest(projectID: snapshot.id)
        request.stepCursor = snapshot.stepCursor + 1
        return request
    }

    /// A request that discards the steps after the cursor (`stepIDs[stepCursor...]`), adds `content`
    /// as the new current step and moves the cursor past it. Nil when the snapshot has no step IDs.
    public static func addStep(_ snapshot: ProjectSnapshot, content: StepContent) -> ProjectUpdateRequest? {
        guard let stepIDs = snapshot.stepIDs else { return nil }
        var request = ProjectUpdateRequest(projectID: snapshot.id)
        let cursor = max(0, min(snapshot.stepCursor, stepIDs.count))
        request.stepIDsToDelete = Array(stepIDs[cursor...])
        request.stepsContentToAdd = [content]
        request.stepCursor = snapshot.stepCursor + 1
        return request
    }
}

/// A change ``ProjectStorage`` reports to ``ProjectStorage/events`` after it is durable.
public enum ProjectStorageEvent: Hashable, Sendable {
    /// ``ProjectStorage/createProject()`` created the project.
    case created(UUID)
    /// ``ProjectStorage/update(_:)`` updated the project.
    case updated(UUID)
    /// ``ProjectStorage/deleteProject(_:)`` deleted the project.
    case deleted(UUID)
    /// ``ProjectStorage/duplicateProject(_:)`` copied `source` to the new project `destination`.
    case duplicated(source: UUID, destination: UUID)
}
