import ContentStore
import Foundation
import Testing
@testable import Sync

@Suite("Sync: live announcements")
struct SyncLiveTests {
    @Test func onlineClientsPullAsSoonAsTheServerAnnouncesAChange() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        // Automatic syncs, with an interval far beyond the test: only announcements can move data.
        let automatic: (inout SyncConfiguration) -> Void = { $0.syncsAutomatically = true; $0.interval = .seconds(3600) }
        let a = try fixture.client(try fixture.store("a"), server.url, "a", automatic)
        let b = try fixture.client(try fixture.store("b"), server.url, "b", automatic)
        let events = b.events
        try await a.persist(.note("live", "pushed by a's background sync"))
        #expect(try await eventually { try b.object(container: "notes", id: "live") != nil })
        #expect(try await eventually { try a.pendingCount == 0 })
        var sawChange = false
        for await event in events {
            if case .changed(let container, let ids) = event, container == "notes", ids.contains("live") { sawChange = true; break }
        }
        #expect(sawChange)

        _ = try await server.server.persist(.note("from-server", "written on the server"))
        #expect(try await eventually { try a.object(container: "notes", id: "from-server") != nil })
        try await server.server.delete(container: "notes", id: "live")
        #expect(try await eventually { try b.object(container: "notes", id: "live") == nil })
    }
}
