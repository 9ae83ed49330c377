import ContentStore
import Foundation
import Synchronization
import Testing
@testable import Sync

@Suite("Sync: tombstones and their cleanup")
struct SyncTombstoneTests {
    @Test func tombstonesReachEveryClientAndAreCleanedUp() async throws {
        let fixture = SyncFixture()
        let serverStore = try fixture.store("server")
        let server = try await fixture.startServer(serverStore)
        defer { Task { await server.stop() } }
        let clients = try ["a", "b", "c"].map { try fixture.client(try fixture.store($0), server.url, $0) }
        try await clients[0].persist(.note("x", "doomed", attachments: ["blob": Data(repeating: 3, count: 10_000)]))
        try await clients[0].persist(.note("y", "stays"))
        for client in clients { _ = try await client.sync() }
        #expect(try clients[2].object(container: "notes", id: "x") != nil)

        try await clients[1].delete(container: "notes", id: "x")
        for client in [clients[1], clients[0], clients[2]] { _ = try await client.sync() }
        for client in clients {
            #expect(try client.object(container: "notes", id: "x") == nil)
            #expect(try client.objects(in: "notes").map(\.id) == ["y"])
        }
        // Not every client has told the server it pulled past the tombstone yet (a pull reports
        // where it started): the tombstone stays until they have.
        #expect(try await server.server.collectTombstones() == 0)
        #expect(try await serverStore.keys(withPrefix: Keys.serverObjects).count == 2)
        for client in clients { _ = try await client.sync() }
        #expect(try await server.server.collectTombstones() == 1)
        #expect(try await serverStore.keys(withPrefix: Keys.serverObjects).count == 1)
        // Those clients are not behind the floor: no resync, nothing changes.
        for client in clients { #expect(try await client.sync().pulled == 0) }
    }

    @Test func singleContainerSyncsReportProgressForCleanup() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        try await a.persist(.note("x", "doomed"))
        try await a.persist(.note("kept", "elsewhere", container: "other"))
        _ = try await a.sync("notes")
        _ = try await a.sync("other")
        _ = try await b.sync("notes")
        try await b.delete(container: "notes", id: "x")
        _ = try await b.sync("notes")
        _ = try await a.sync("notes")
        #expect(try a.objects(in: "notes").isEmpty)
        // Each pull reports where it started: one more round and both hold "notes" past the tombstone,
        // though neither has pulled "other" (nor ever synced everything).
        #expect(try await server.server.collectTombstones() == 0)
        for client in [a, b] { _ = try await client.sync("notes") }
        #expect(try await server.server.collectTombstones() == 1)
        for client in [a, b] { #expect(try await client.sync("notes").pulled == 0) }
        #expect(try b.objects(in: "notes").isEmpty)
    }

    @Test func aClientAwayPastCleanupResyncsAndKeepsItsPendingWork() async throws {
        let fixture = SyncFixture()
        let offset = Mutex<TimeInterval>(0)
        let server = try await fixture.startServer(try fixture.store("server")) { configuration in
            configuration.clientRetention = .seconds(3600)
            configuration.now = { Date().addingTimeInterval(offset.withLock { $0 }) }
        }
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        for id in ["x", "y", "z"] { try await a.persist(.note(id, "v1 of \(id)")) }
        _ = try await a.sync()
        _ = try await b.sync()

        // b goes away; a deletes x; two hours pass; a is still around and the tombstone goes.
        try await b.persist(.note("y", "b's offline edit of y"))
        try await b.persist(.note("new", "made offline on b"))
        try await a.delete(container: "notes", id: "x")
        _ = try await a.sync()
        offset.withLock { $0 = 7200 }
        _ = try await a.sync()
        _ = try await a.sync()
        #expect(try await server.server.collectTombstones() == 1)

        let report = try await b.sync()
        #expect(report.pushed == 2)
        #expect(try b.pendingCount == 0)
        #expect(try b.objects(in: "notes").map(\.id) == ["new", "y", "z"])
        #expect(try b.object(container: "notes", id: "y")?.text == "b's offline edit of y")
        _ = try await a.sync()
        #expect(try a.objects(in: "notes") == b.objects(in: "notes"))
    }
}
