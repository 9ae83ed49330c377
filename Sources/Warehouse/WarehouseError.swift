import Foundation

/// An error raised by ``ProjectStorage``. Each case names the project (and step) involved and
/// carries the cause as `underlying`: usually a `StoreError` (for example with code `notFound` for
/// an unknown project or step, `missingBlob`, `io`, `corrupted`), or a Foundation error from reading
/// an assets source directory.
///
/// Whenever one of these is thrown, the storage is unchanged.
public enum WarehouseError: Error {
    /// Creating, updating, duplicating a project, setting its dates or assets, or exporting its
    /// assets failed.
    case writeFailed(projectID: UUID?, stepID: UUID?, underlying: (any Error)?)
    /// Fetching a project, step, asset or the list of projects failed.
    case fetchFailed(projectID: UUID?, stepID: UUID?, underlying: (any Error)?)
    /// Deleting a project failed; an unknown project has `underlying` with code `notFound`.
    case deleteFailed(projectID: UUID, underlying: (any Error)?)
    /// Computing ``ProjectStorage/sizeOfProject(_:)`` or ``ProjectStorage/storageSize()`` failed.
    case calculateSizeFailed(projectID: UUID?, underlying: (any Error)?)
    /// An argument is invalid (an asset name, or a cursor beyond the steps an update leaves); the
    /// message names the project and the value.
    case invalidArgument(String)
}

extension WarehouseError: CustomStringConvertible {
    /// A message naming the operation, the IDs and the cause.
    public var description: String {
        func ids(_ project: UUID?, _ step: UUID?) -> String {
            var parts: [String] = []
            if let project { parts.append("project \(project.uuidString)") }
            if let step { parts.append("step \(step.uuidString)") }
            return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
        }
        func cause(_ error: (any Error)?) -> String {
            error.map { ": \($0)" } ?? ""
        }
        switch self {
        case let .writeFailed(project, step, underlying):
            return "write failed\(ids(project, step))\(cause(underlying))"
        case let .fetchFailed(project, step, underlying):
            return "fetch failed\(ids(project, step))\(cause(underlying))"
        case let .deleteFailed(project, underlying):
            return "delete failed\(ids(project, nil))\(cause(underlying))"
        case let .calculateSizeFailed(project, underlying):
            return "size calculation failed\(ids(project, nil))\(cause(underlying))"
        case let .invalidArgument(message):
            return "invalid argument: \(message)"
        }
    }
}

extension WarehouseError {
    /// The project the error concerns, when it names one.
    public var projectID: UUID? {
        switch self {
        case let .writeFailed(project, _, _), let .fetchFailed(project, _, _), let .calculateSizeFailed(project, _):
            return project
        case let .deleteFailed(project, _):
            return project
        case .invalidArgument:
            return nil
        }
    }

    /// The step the error concerns, when it names one.
    public var stepID: UUID? {
        switch self {
        case let .writeFailed(_, step, _), let .fetchFailed(_, step, _):
            return step
        case .deleteFailed, .calculateSizeFailed, .invalidArgument:
            return nil
        }
    }

    /// The underlying cause, when there is one.
    public var underlying: (any Error)? {
        switch self {
        case let .writeFailed(_, _, underlying), let .fetchFailed(_, _, underlying):
            return underlying
        case let .deleteFailed(_, underlying), let .calculateSizeFailed(_, underlying):
            return underlying
        case .invalidArgument:
            return nil
        }
    }
}
