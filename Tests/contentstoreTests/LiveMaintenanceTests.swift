#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

/// `contentstore gc|verify|stats|checkpoint` against a store another process holds open: that
/// process does the work over its control socket (Docs/control-protocol.md). The holder is this test
/// process; the commands are real child processes.
@Suite(.serialized, .blocking) struct LiveMaintenanceTests {
    /// Commits continuously on a thread of its own, remembering every acknowledged one.
    final class Committer: Sendable {
        let store: Store
        private let acknowledged = Mutex<[Int: Digest]>([:])
        private let stopping = Atomic<Bool>(false)
        private let done = DispatchSemaphore(value: 0)

        init(_ store: Store) { self.store = store }

        func start() {
            Thread { [self] in
                var index = 0
                while !stopping.load(ordering: .acquiring) {
                    do {
                        let digest = try store.put(Data("blob \(index)".utf8))
                        try store.write { tx in try tx.setRecord(Record(value: Data("value \(index)".utf8), references: [digest]), forKey: "c/\(index)") }
                        acknowledged.withLock { $0[index] = digest }
                    } catch {
                        Issue.record("commit \(index) failed: \(error)")
                        break
                    }
                    index += 1
                }
                done.signal()
            }.start()
        }

        /// Stops committing; returns every acknowledged commit.
        func stop() -> [Int: Digest] {
            stopping.store(true, ordering: .releasing)
            done.wait()
            return acknowledged.withLock { $0 }
        }
    }

    @Test func commandsRunInTheHoldingProcessWhileItCommits() throws {
        let dir = ScratchDirectory()
        let store = try Store(at: dir.store)
        let garbage = try (0 ..< 50).map { try store.put(Data("garbage \($0)".utf8)) }
        // Times are whole seconds: with a grace of 2 s a blob is collectable once its time is 3 s
        // older than the collector's, which the garbage is after this pause. The committer's blobs
        // are seconds younger, so each stays protected between its put and its commit, as rule 3
        // promises within the grace period (with `--grace 0` a collection that decided in that
        // window could take one, and the commit would rightly fail with `missingBlob`).
        sleep(3)
        let committer = Committer(store)
        committer.start()

        let gc = try CommandLineTool.run(["gc", "--grace", "2s", "--json", "--store", dir.store.path])
        #expect(gc.status == 0, "\(gc.stderr)")
        let gcReport = try gc.json()
        #expect((gcReport["blobsRemoved"] as? Int ?? 0) >= 50, "\(gc.output)")
        #expect(gcReport["duration"] != nil && gcReport["packsRewritten"] != nil)

        let verify = try CommandLineTool.run(["verify", "--read-data", "--json", "--store", dir.store.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(try verify.json()["isClean"] as? Bool == true, "\(verify.output)")
        #expect(try verify.json()["readData"] as? Bool == true)

        let stats = try CommandLineTool.run(["stats", "--json", "--store", dir.store.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect((try stats.json()["recordCount"] as? Int ?? 0) > 0, "\(stats.output)")

        let checkpoint = try CommandLineTool.run(["checkpoint", "--json", "--store", dir.store.path])
        #expect(checkpoint.status == 0, "\(checkpoint.stderr)")
        #expect(try checkpoint.json()["walBytesAfter"] != nil, "\(checkpoint.output)")

        let acknowledged = committer.stop()
        #expect(!acknowledged.isEmpty)
        for (index, digest) in acknowledged {
            #expect(try store.record(forKey: "c/\(index)") == Record(value: Data("value \(index)".utf8), references: [digest]))
            #expect(try store.get(digest) == Data("blob \(index)".utf8))
        }
        for digest in garbage { #expect(!store.contains(digest), "garbage \(digest) survived the remote gc") }
        try store.close()

        // The same report, member for member, as on a closed store.
        let local = try CommandLineTool.run(["stats", "--json", "--store", dir.store.path])
        #expect(local.status == 0)
        #expect(Set(try local.json().keys) == Set(try stats.json().keys))
        #expect(!FileManager.default.fileExists(atPath: dir.store.appendingPathComponent("control.sock").path), "close removes the socket")
    }

    @Test func textOutputAndExitCodesMatchAClosedStore() throws {
        let dir = ScratchDirectory()
        try makeStore(at: dir.store, count: 3, garbage: 2)
        let store = try Store(at: dir.store)
        let remote = try CommandLineTool.run(["verify", "--store", dir.store.path])
        #expect(remote.status == 0, "\(remote.stderr)")
        #expect(remote.output.hasPrefix("OK: "), "\(remote.output)")
        let dryRun = try CommandLineTool.run(["gc", "--dry-run", "--grace", "0", "--store", dir.store.path])
        #expect(dryRun.status == 0)
        #expect(dryRun.output.contains("Would remove 2 blobs"), "\(dryRun.output)")
        try store.close()
    }

    /// A socket left by a process killed with SIGKILL: the store opens locally past it, and the next
    /// holder replaces it and answers.
    @Test func staleSocketAfterKillIsReplaced() throws {
        let dir = ScratchDirectory()
        let workload = try #require(CommandLineTool.executable?.deletingLastPathComponent().appendingPathComponent("CrashWorkload"))
        let child = Process()
        child.executableURL = workload
        child.arguments = [dir.store.path, "1", "0", "--threads", "1"]
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        let socket = dir.store.appendingPathComponent("control.sock").path
        let deadline = ContinuousClock.now + .seconds(300)
        while !FileManager.default.fileExists(atPath: socket), ContinuousClock.now < deadline { usleep(10_000) }
        #expect(FileManager.default.fileExists(atPath: socket), "the workload listens")
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: socket), "SIGKILL leaves the socket file behind")

        let local = try CommandLineTool.run(["stats", "--json", "--store", dir.store.path])
        #expect(local.status == 0, "a stale socket does not make the store look held: \(local.stderr)")

        let store = try Store(at: dir.store)
        let remote = try CommandLineTool.run(["stats", "--json", "--store", dir.store.path])
        #expect(remote.status == 0, "the new holder answers on the replaced socket: \(remote.stderr)")
        #expect(try remote.json()["recordCount"] as? Int == (try store.statistics().recordCount))
        try store.close()
    }

    /// A peer running as another user (not root) is refused with a clear message, and nothing changes.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func peerOfAnotherUserIsRefused() throws {
        // Under /tmp, whatever TMPDIR is: the other user must be able to reach the socket at all, so
        // that the check under test is the peer's uid.
        let directory = URL(fileURLWithPath: "/tmp/cs-peer-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(at: directory.appendingPathComponent("store"))
        let garbage = try store.put(Data("garbage".utf8))
        let socket = directory.appendingPathComponent("store/control.sock").path
        for path in [directory.path, directory.appendingPathComponent("store").path] { chmod(path, 0o755) }
        chmod(socket, 0o666)
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b'{"version":1,"command":"gc","gracePeriodSeconds":0}\\n')
            data = b''
            while True:
                chunk = s.recv(4096)
                if not chunk: break
                data += chunk
            print(data.decode())
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = ["-u", "nobody", "--", "/usr/bin/python3", "-c", script, socket]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(answer.contains("\"refused\""), "\(answer)")
        #expect(answer.contains("uid 65534"), "the message names the peer's uid: \(answer)")
        #expect(store.contains(garbage), "nothing changed")
        try store.close()
    }

    /// Ctrl-C while the holder runs a long gc: the command asks it to cancel, it stops between
    /// batches, the command exits 130, and the store is consistent.
    @Test func ctrlCCancelsARemoteCollection() throws {
        let dir = ScratchDirectory()
        let logs = Captured()
        var configuration = Store.Configuration()
        configuration.logger = Logger(label: "holder") { _ in logs }
        let store = try Store(at: dir.store, configuration: configuration)
        let garbage = try (0 ..< 5000).map { try store.put(Data("garbage \($0)".utf8)) }

        // The holder's own verification holds the maintenance lock, so the remote gc waits behind it.
        let gate = DispatchSemaphore(value: 0)
        let verified = DispatchSemaphore(value: 0)
        let held = Atomic<Bool>(false)
        Thread {
            _ = try? store.verify(VerificationOptions()) { _ in
                if !held.exchange(true, ordering: .acquiringAndReleasing) { gate.wait() }
            }
            verified.signal()
        }.start()
        while !held.load(ordering: .acquiring) { usleep(1000) }

        let child = try CommandLineTool.start(["gc", "--grace", "0", "--store", dir.store.path])
        let deadline = ContinuousClock.now + .seconds(300)
        while !logs.contains("control request"), ContinuousClock.now < deadline { usleep(5000) }
        #expect(logs.contains("control request"), "the holder received the gc")
        kill(child.pid, SIGINT)
        // The gate opens only once the holder has the cancel: a fixed pause here lost the race on a
        // loaded machine, and the gc then ran to the end.
        let cancelDeadline = ContinuousClock.now + .seconds(300)
        while !logs.contains("control request cancelled by the client"), ContinuousClock.now < cancelDeadline { usleep(5000) }
        #expect(logs.contains("control request cancelled by the client"), "the holder received the cancel")
        gate.signal()
        verified.wait()
        let outcome = child.wait()
        #expect(outcome.status == 130, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("cancelled"), "\(outcome.stderr)")
        #expect(garbage.allSatisfy { store.contains($0) }, "the cancelled gc removed nothing")
        #expect(try store.verify(VerificationOptions(readData: true)).isClean)
        let again = try CommandLineTool.run(["gc", "--grace", "0", "--json", "--store", dir.store.path])
        #expect(again.status == 0)
        #expect(try again.json()["blobsRemoved"] as? Int == garbage.count)
        try store.close()
    }
}

/// Log messages a holder wrote, for waiting on one.
private final class Captured: LogHandler, @unchecked Sendable {
    private let messages = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { messages.withLock { $0.append("\(event.message)") } }

    func contains(_ message: String) -> Bool { messages.withLock { $0.contains(message) } }
}
