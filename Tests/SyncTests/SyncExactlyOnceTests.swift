import ContentStore
import Foundation
import Synchronization
import Testing
@testable import Sync

@Suite("Sync: exactly-once pushes")
struct SyncExactlyOnceTests {
    @Test func aPushWhoseResponseIsLostIsAppliedOnce() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let server = try await fixture.startServer(serverStore)
        defer { Task { await server.stop() } }
        let transport = HookedTransport(server.url, afterPush: { true })
        let a = try fixture.client(try fixture.store("a"), transport: transport, "a")
        try await a.persist(.note("x", "once"))
        let report = try await a.sync()
        #expect(transport.pushes.load(ordering: .relaxed) == 2)   // the lost one and its retry
        #expect(report.pushed == 1)
        #expect(try a.pendingCount == 0)
        #expect(try await server.server.engine.sequence == 1)
        #expect(try a.object(container: "notes", id: "x")?.revision == 1)
    }

    @Test func anEditAfterALostResponseIsNotOverruledByItsOwnPush() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let transport = HookedTransport(server.url, afterPush: { true })
        let a = try fixture.client(try fixture.store("a"), transport: transport, "a") { $0.retries = 0 }
        try await a.persist(.note("x", "first"))
        await #expect(throws: SyncError.self) { try await a.sync() }
        #expect(try a.pendingCount == 1)
        try await a.persist(.note("x", "second"))
        let report = try await a.sync()
        #expect(report.pushed == 1)
        #expect(report.conflicts == 0)
        #expect(try a.conflicts().isEmpty)
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        _ = try await b.sync()
        #expect(try b.object(container: "notes", id: "x")?.text == "second")
        #expect(try await server.server.engine.sequence == 2)
    }

    @Test func aClientForgottenAfterItsRetentionStillRetriesExactlyOnce() async throws {
        let fixture = SyncFixture()
        let offset = Mutex<TimeInterval>(0)
        let server = try await fixture.startServer(try fixture.store("server")) { configuration in
            configuration.clientRetention = .seconds(3600)
            configuration.now = { Date().addingTimeInterval(offset.withLock { $0 }) }
        }
        defer { Task { await server.stop() } }
        let transport = HookedTransport(server.url, afterPush: { true })
        let a = try fixture.client(try fixture.store("a"), transport: transport, "a") { $0.retries = 0 }
        try await a.persist(.note("x", "once"))
        await #expect(throws: SyncError.self) { try await a.sync() }
        #expect(try await server.server.engine.sequence == 1)

        // a stays silent past its retention and is forgotten; b deletes x and the tombstone goes.
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        _ = try await b.sync()
        try await b.delete(container: "notes", id: "x")
        _ = try await b.sync()
        offset.withLock { $0 = 7200 }
        _ = try await b.sync()
        #expect(try await server.server.collectTombstones() == 1)

        // a's retry of the push whose answer it lost gets that answer: x is not written again.
        let report = try await a.sync()
        #expect(report.pushed == 1)
        #expect(report.conflicts == 0)
        #expect(try a.pendingCount == 0)
        #expect(try await server.server.engine.sequence == 2)
        #expect(try a.object(container: "notes", id: "x") == nil)
        _ = try await b.sync()
        #expect(try b.objects(in: "notes").isEmpty)
    }

    @Test func aServerRestartMidPushLosesNothingAndDuplicatesNothing() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let first = try await fixture.startServer(serverStore)
        let port = first.port
        // The push reaches the server, which then stops before its answer arrives.
        let transport = HookedTransport(first.url, afterPush: { await first.stop(); return true })
        let a = try fixture.client(try fixture.store("a"), transport: transport, "a")
        for index in 0 ..< 5 {
            try await a.persist(.note("\(index)", "body \(index)", attachments: ["file": Data(repeating: UInt8(index), count: 4096)]))
        }
        let error = await #expect(throws: SyncError.self) { try await a.sync() }
        #expect(error?.code == .unavailable)
        #expect(try a.pendingCount == 5)

        let second = try await fixture.startServer(serverStore) { $0.port = port }
        defer { Task { await second.stop() } }
        let report = try await a.sync()
        #expect(report.pushed == 5)
        #expect(report.conflicts == 0)
        #expect(try a.pendingCount == 0)
        #expect(try await second.server.engine.sequence == 5)
        let b = try fixture.client(try fixture.store("b"), second.url, "b")
        #expect(try await b.sync().pulled == 5)
        #expect(try b.objects(in: "notes") == a.objects(in: "notes"))
    }
}

@Suite("Sync: one server run after another")
struct SyncServerRestartTests {
    @Test func portWithoutRunIsNotRunningButWaitsForARunStartingInTime() async throws {
        let fixture = SyncFixture()
        var impatient = SyncServerConfiguration()
        impatient.startTimeout = .milliseconds(300)
        let never = SyncServer(store: try fixture.store("never"), configuration: impatient)
        let error = await #expect(throws: SyncError.self) { try await never.port }
        #expect(error?.code == .notRunning)

        // A second server waits long enough for its run to start even on a loaded machine, where
        // the task that starts it may wait seconds for a thread.
        var patient = SyncServerConfiguration()
        patient.startTimeout = .seconds(300)
        let server = SyncServer(store: try fixture.store("server"), configuration: patient)
        let asked = Task { try await server.port }
        try await Task.sleep(for: .milliseconds(50))
        let running = Task { try await server.run() }
        defer { running.cancel() }
        let port = try await asked.value
        #expect(port > 0)
        #expect(try await server.port == port)
    }

    @Test func theSameServerRunsAgainOnItsPort() async throws {
        let fixture = SyncFixture()
        let server = SyncServer(store: try fixture.store("server"))
        var running = Task { try await server.run() }
        let port = try await server.port
        let a = try fixture.client(try fixture.store("a"), URL(string: "http://127.0.0.1:\(port)")!, "a")
        try await a.persist(.note("x", "before"))
        #expect(try await a.sync().pushed == 1)
        running.cancel()
        _ = await running.result
        try await a.persist(.note("y", "while down"))
        await #expect(throws: SyncError.self) { try await a.sync() }

        _ = try await server.persist(.note("z", "written on the server while it does not listen"))
        running = Task { try await server.run() }
        defer { running.cancel() }
        #expect(try await server.port > 0)
        let report = try await a.sync()
        #expect(report.pushed == 1)
        #expect(report.pulled == 1)
        #expect(try a.objects(in: "notes").map(\.id) == ["x", "y", "z"])
    }
}
