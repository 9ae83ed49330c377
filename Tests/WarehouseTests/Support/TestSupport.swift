import Foundation
import Synchronization
import Testing
@testable import Warehouse

/// A fresh directory under the system's temporary directory, removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("wh-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    /// A new subdirectory holding `files` (relative path → bytes).
    func directory(_ name: String, files: [String: Data]) throws -> URL {
        let root = url.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        for (path, data) in files {
            let file = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: file)
        }
        return root
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let date: Mutex<Date>
    init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) { date = Mutex(start) }
    var now: Date { date.withLock { $0 } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

/// A store and a storage over it, in their own temporary directory.
struct Fixture {
    static let bundleID = "com.example.warehouse-tests"

    let directory: TemporaryDirectory
    let store: Store
    let storage: ProjectStorage
    let clock: TestClock?

    init(name: String = #function, bundleID: String = Fixture.bundleID, clock: TestClock? = nil) throws {
        directory = TemporaryDirectory(name)
        var configuration = Store.Configuration()
        if let clock { configuration.now = { clock.now } }
        store = try Store(at: directory.store, configuration: configuration)
        storage = ProjectStorage(store: store, bundleID: bundleID)
        self.clock = clock
    }

    /// Another storage over the same store.
    func storage(bundleID: String) -> ProjectStorage {
        ProjectStorage(store: store, bundleID: bundleID)
    }

    func snapshot(_ id: UUID) throws -> ProjectSnapshot {
        try storage.fetchSnapshot(ofProject: id, options: .all)
    }

    /// Adds steps with user data "step <n>" through `addStep` requests; returns their IDs.
    @discardableResult
    func addSteps(_ count: Int, to id: UUID) throws -> [UUID] {
        for _ in 0 ..< count {
            let snapshot = try snapshot(id)
            let content = StepContent(userData: Data("step \(snapshot.stepCursor)".utf8))
            try storage.update(#require(ProjectUpdateRequest.addStep(snapshot, content: content)))
        }
        return try #require(try snapshot(id).stepIDs)
    }
}

/// Deterministic pseudo-random bytes (so tests see distinct, incompressible content).
func bytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var output = [UInt8](repeating: 0, count: count)
    for index in 0 ..< count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        output[index] = UInt8(truncatingIfNeeded: state)
    }
    return Data(output)
}

/// Records what a storage reports to an observer.
final class RecordingObserver: ProjectStorageObserver {
    private let log = Mutex<[ProjectStorageEvent]>([])
    var events: [ProjectStorageEvent] { log.withLock { $0 } }

    func storage(_ storage: ProjectStorage, createdProjectWithID id: UUID) { log.withLock { $0.append(.created(id)) } }
    func storage(_ storage: ProjectStorage, updatedProjectWithID id: UUID) { log.withLock { $0.append(.updated(id)) } }
    func storage(_ storage: ProjectStorage, deletedProjectWithID id: UUID) { log.withLock { $0.append(.deleted(id)) } }
    func storage(_ storage: ProjectStorage, duplicatedProjectWithID id: UUID, destinationID: UUID) {
        log.withLock { $0.append(.duplicated(source: id, destination: destinationID)) }
    }
}

extension WarehouseError {
    /// The case's name, for assertions.
    var caseName: String {
        switch self {
        case .writeFailed: "writeFailed"
        case .fetchFailed: "fetchFailed"
        case .deleteFailed: "deleteFailed"
        case .calculateSizeFailed: "calculateSizeFailed"
        case .invalidArgument: "invalidArgument"
        }
    }

    /// The code of the underlying `StoreError`, if that is the cause.
    var storeCode: StoreError.Code? { (underlying as? StoreError)?.code }
}

/// Runs `body`, expecting a `WarehouseError` of case `name`; returns it.
@discardableResult
func expectWarehouseError(
    _ name: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> WarehouseError? {
    let error = #expect(throws: WarehouseError.self, sourceLocation: sourceLocation) { try body() }
    if let error { #expect(error.caseName == name, "\(error)", sourceLocation: sourceLocation) }
    return error
}
