import ContentStore
import Foundation
import Synchronization
import Testing
@testable import Sync

/// A client process (Tests/SyncWorkload) killed with SIGKILL while persisting offline: after a
/// restart, every object it acknowledged is pending, and a sync pushes them.
@Suite("Sync: a killed client")
struct SyncCrashTests {
    static let workload: URL? = {
        var candidates: [URL] = []
        if let path = ProcessInfo.processInfo.environment["SYNC_WORKLOAD_BINARY"], !path.isEmpty {
            candidates.append(URL(fileURLWithPath: path))
        }
        var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
        for bundle in [Bundle.main] + Bundle.allBundles {
            directories += [bundle.bundleURL, bundle.bundleURL.deletingLastPathComponent()]
        }
        candidates += directories.map { $0.appendingPathComponent("SyncWorkload") }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    /// Starts the workload, kills it with SIGKILL once it has acknowledged `count` objects, and
    /// returns the highest index it acknowledged (whole lines only: a line cut by the kill was
    /// written before its persist returned) and how it ended.
    static func runAndKill(_ executable: URL, store: URL, after count: Int) throws -> (Int, Process.TerminationReason) {
        let process = Process()
        process.executableURL = executable
        process.arguments = [store.path, offlineURL.absoluteString, "killed", "100000"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var text = ""
        var acknowledged = -1
        while acknowledged < count - 1 {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            text += String(decoding: chunk, as: UTF8.self)
            let complete = text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
            acknowledged = complete.split(separator: "\n").compactMap { $0.hasPrefix("persisted ") ? Int($0.dropFirst(10)) : nil }.max() ?? -1
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return (acknowledged, process.terminationReason)
    }

    @Test func aClientKilledWithPendingWorkPushesItAfterRestart() async throws {
        let executable = try #require(Self.workload, "SyncWorkload was not found beside the tests; build it (swift build --build-tests)")
        let fixture = SyncFixture()
        let storeURL = fixture.storeURL("client")

        // The workload persists offline; it is killed once it has acknowledged at least 25 objects.
        // Reading its output and waiting for it block, so they run on a thread of their own.
        let (acknowledged, reason) = try await onOwnThread { try Self.runAndKill(executable, store: storeURL, after: 25) }
        #expect(reason == .uncaughtSignal)
        #expect(acknowledged >= 24)

        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let restarted = try fixture.client(try fixture.store("client"), server.url, "killed")
        let pending = try restarted.pendingCount
        #expect(pending >= acknowledged + 1)
        let report = try await restarted.sync()
        #expect(report.pushed == pending)
        #expect(try restarted.pendingCount == 0)

        let reader = try fixture.client(try fixture.store("reader"), server.url, "reader")
        _ = try await reader.sync()
        let objects = try reader.objects(in: "crash")
        #expect(objects.count == pending)
        for index in 0 ... acknowledged {
            let object = try #require(try reader.object(container: "crash", id: "item-\(index)"))
            #expect(object.text == "body \(index)")
            #expect(object.attachments["note"] == Data("attachment \(index % 7)".utf8))
        }
    }
}

/// Runs blocking work (a child process's pipe, waiting for it) on a new thread, not the cooperative pool.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
