import BenchSupport
import Foundation
import Synchronization
import Warehouse

/// Lightricks' original `WHSProjectStorage` layout, made durable: a directory per project and per
/// step, changed by atomic directory swaps. The layout is the original's:
///
///     <base>/<project>/data/metadata   binary property list {stepCursor, bundleID}
///     <base>/<project>/data/stepsIDs   16 bytes per step ID, in order
///     <base>/<project>/data/userData   the project's user data
///     <base>/<project>/assets/…        project assets
///     <base>/<project>/steps/<step>/data/userData, …/assets/…
///
/// and so is an update: the new step's directory is created first, then the whole `data`
/// directory is written anew in a temporary directory (unchanged files copied, as the original's
/// `copyItemAtURL` did) and swapped in atomically (`replaceItemAtURL`, here `renameat2` with
/// `RENAME_EXCHANGE`), then the steps the update dropped are removed. What the original lacked is
/// durability, added the standard way: every file written is `fsync`ed, every directory whose
/// entries changed is `fsync`ed before it is renamed into place, and the parent after the rename.
/// The step's files are written straight into the temporary directory that is renamed into place
/// (the original copied them there from the app's source directory: one copy fewer here).
/// Duplicating copies the project's tree (`copy_file_range`) into a temporary directory and
/// renames it into place, as the original copied and swapped.
final class DirectoryProjectStore: ProjectStoreContender {
    let name = Name.directoryPerStep
    let base: String
    private let temporaryCounter = Atomic<Int>(0)

    init(directory: String) throws {
        base = directory
        try POSIX.makeDirectory(base + "/.tmp")
        try POSIX.fsyncDirectory(base)
    }

    // MARK: Paths

    private func projectPath(_ project: UUID) -> String { base + "/" + project.uuidString }
    private func stepPath(_ step: UUID, in project: UUID) -> String { projectPath(project) + "/steps/" + step.uuidString }

    /// A fresh path in the replacement directory (the original's `NSItemReplacementDirectory`, on the same volume).
    private func temporaryPath() -> String {
        base + "/.tmp/" + String(temporaryCounter.wrappingAdd(1, ordering: .relaxed).oldValue)
    }

    // MARK: Files

    private static func write(_ data: Data, to path: String) throws {
        try data.withUnsafeBytes { try POSIX.writeFile(path, $0, sync: true) }
    }

    private static func read(_ path: String) throws -> Data {
        guard let bytes = try POSIX.readFile(path) else {
            throw SystemCallError(call: "open", path: path, code: ENOENT)
        }
        return Data(bytes)
    }

    private struct Metadata {
        var stepCursor: Int
        var bundleID: String

        func encoded() throws -> Data {
            try PropertyListSerialization.data(fromPropertyList: ["stepCursor": stepCursor, "bundleID": bundleID],
                                               format: .binary, options: 0)
        }

        init(stepCursor: Int, bundleID: String) {
            self.stepCursor = stepCursor
            self.bundleID = bundleID
        }

        init(_ data: Data, path: String) throws {
            let object = try PropertyListSerialization.propertyList(from: data, format: nil)
            guard let dictionary = object as? [String: Any], let cursor = dictionary["stepCursor"] as? Int,
                  let bundleID = dictionary["bundleID"] as? String else {
                throw VerificationFailed(description: "\(path): not a project metadata property list")
            }
            self.init(stepCursor: cursor, bundleID: bundleID)
        }
    }

    private func metadata(of project: UUID) throws -> Metadata {
        let path = projectPath(project) + "/data/metadata"
        return try Metadata(try Self.read(path), path: path)
    }

    private func stepIDs(of project: UUID) throws -> [UUID] {
        let data = try Self.read(projectPath(project) + "/data/stepsIDs")
        return stride(from: 0, to: data.count - 15, by: 16).map { offset in
            data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(fromByteOffset: offset, as: uuid_t.self)) }
        }
    }

    private static func encode(_ stepIDs: [UUID]) -> Data {
        var data = Data(capacity: stepIDs.count * 16)
        for id in stepIDs { withUnsafeBytes(of: id.uuid) { data.append(contentsOf: $0) } }
        return data
    }

    /// Writes `directory`'s named files, `fsync`ing each and then the directory.
    private static func writeDirectory(_ directory: String, files: [(name: String, data: Data)]) throws {
        try POSIX.makeDirectory(directory, intermediates: false)
        for file in files { try write(file.data, to: directory + "/" + file.name) }
        try POSIX.fsyncDirectory(directory)
    }

    /// The original's `writeDataOfProject`: a new `data` directory, swapped in atomically. A nil
    /// part is copied from the current one.
    private func writeData(of project: UUID, metadata: Metadata?, stepIDs: [UUID]?, userData: Data?) throws {
        let current = projectPath(project) + "/data"
        let replacement = temporaryPath()
        try POSIX.makeDirectory(replacement, intermediates: false)
        for (name, data) in [("metadata", try metadata?.encoded()), ("stepsIDs", stepIDs.map(Self.encode)), ("userData", userData)] {
            if let data {
                try Self.write(data, to: replacement + "/" + name)
            } else {
                try POSIX.copyFile(current + "/" + name, to: replacement + "/" + name, sync: true)
            }
        }
        try POSIX.fsyncDirectory(replacement)
        try POSIX.exchange(replacement, current)
        try POSIX.fsyncDirectory(projectPath(project))
        POSIX.removeTree(replacement)  // the old data; a leftover after a crash is only garbage
    }

    // MARK: Operations

    func createProject(userData: Data) throws -> UUID {
        let project = UUID()
        let staging = temporaryPath()
        try POSIX.makeDirectory(staging, intermediates: false)
        try Self.writeDirectory(staging + "/data", files: [
            ("metadata", try Metadata(stepCursor: 0, bundleID: "compare").encoded()),
            ("stepsIDs", Data()), ("userData", userData),
        ])
        try Self.writeDirectory(staging + "/assets", files: [])
        try Self.writeDirectory(staging + "/steps", files: [])
        try POSIX.fsyncDirectory(staging)
        try POSIX.rename(staging, to: projectPath(project))
        try POSIX.fsyncDirectory(base)
        return project
    }

    func addStep(to project: UUID, content: StepContent) throws {
        let metadata = try metadata(of: project)
        let ids = try stepIDs(of: project)
        guard metadata.stepCursor <= ids.count else { throw VerificationFailed(description: "\(project): cursor past the steps") }
        let step = UUID()
        let staging = temporaryPath()
        try POSIX.makeDirectory(staging, intermediates: false)
        try Self.writeDirectory(staging + "/data", files: [("userData", content.userData)])
        try Self.writeDirectory(staging + "/assets", files: content.assets.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        try POSIX.fsyncDirectory(staging)
        try POSIX.rename(staging, to: stepPath(step, in: project))
        try POSIX.fsyncDirectory(projectPath(project) + "/steps")
        let dropped = ids[metadata.stepCursor...]
        try writeData(of: project, metadata: Metadata(stepCursor: metadata.stepCursor + 1, bundleID: metadata.bundleID),
                      stepIDs: Array(ids[..<metadata.stepCursor]) + [step], userData: nil)
        for id in dropped { POSIX.removeTree(stepPath(id, in: project)) }
    }

    func undo(_ project: UUID) throws { try moveCursor(of: project, by: -1) }
    func redo(_ project: UUID) throws { try moveCursor(of: project, by: 1) }

    private func moveCursor(of project: UUID, by delta: Int) throws {
        var metadata = try metadata(of: project)
        let ids = try stepIDs(of: project)
        metadata.stepCursor += delta
        guard (0 ... ids.count).contains(metadata.stepCursor) else {
            throw VerificationFailed(description: "\(project): cursor \(metadata.stepCursor) out of 0...\(ids.count)")
        }
        try writeData(of: project, metadata: metadata, stepIDs: ids, userData: nil)
    }

    /// What the original's `fetchSnapshotOfProjectWithID` read with both fetch options.
    func fetchSnapshot(_ project: UUID) throws -> Int {
        let path = projectPath(project)
        var info = stat()
        guard stat(path, &info) == 0 else { throw SystemCallError(call: "stat", path: path, code: errno) }
        guard POSIX.exists(path + "/assets") else { throw SystemCallError(call: "access", path: path + "/assets", code: ENOENT) }
        _ = try metadata(of: project)
        let count = try stepIDs(of: project).count
        _ = try Self.read(path + "/data/userData")
        return count
    }

    func setAsset(_ data: Data, named name: String, in project: UUID) throws {
        let directory = projectPath(project) + "/assets"
        try Self.write(data, to: directory + "/" + name)
        try POSIX.fsyncDirectory(directory)
    }

    func duplicate(_ project: UUID) throws -> UUID {
        let copy = UUID()
        let staging = temporaryPath()
        try Self.copyTree(projectPath(project), to: staging)
        try POSIX.rename(staging, to: projectPath(copy))
        try POSIX.fsyncDirectory(base)
        return copy
    }

    /// Copies a directory tree, every file and directory `fsync`ed.
    private static func copyTree(_ source: String, to destination: String) throws {
        try POSIX.makeDirectory(destination, intermediates: false)
        for name in try POSIX.directoryEntries(source) ?? [] {
            let from = source + "/" + name, to = destination + "/" + name
            var info = stat()
            guard lstat(from, &info) == 0 else { throw SystemCallError(call: "lstat", path: from, code: errno) }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                try copyTree(from, to: to)
            } else {
                try POSIX.copyFile(from, to: to, sync: true)
            }
        }
        try POSIX.fsyncDirectory(destination)
    }

    func deleteProject(_ project: UUID) throws { POSIX.removeTree(projectPath(project)) }
    func close() throws {}
}
