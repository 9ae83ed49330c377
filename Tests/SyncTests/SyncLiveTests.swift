import ContentStore
import Foundation
import Synchronization
import Testing
@testable import Sync

@Suite("Sync: live announcements")
struct SyncLiveTests {
    @Test func onlineClientsPullAsSoonAsTheServerAnnouncesAChange() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        // Automatic syncs, with an interval far beyond the test: only announcements can move data.
        // Short backoff, so that a request that failed on a loaded machine is soon tried again.
        // The waits below are long because a machine loaded by parallel builds took over 60 s for one
        // sync; a missed announcement still fails them, since nothing else would move the data.
        let automatic: (inout SyncConfiguration) -> Void = {
            $0.syncsAutomatically = true
            $0.interval = .seconds(3600)
            $0.maximumBackoff = .seconds(1)
        }
        let a = try fixture.client(try fixture.store("a"), server.url, "a", automatic)
        let b = try fixture.client(try fixture.store("b"), server.url, "b", automatic)
        let events = b.events
        let sawChange = Flag()
        let listener = Task {
            for await event in events {
                if case .changed(let container, let ids) = event, container == "notes", ids.contains("live") {
                    sawChange.value.store(true, ordering: .relaxed)
                }
            }
        }
        defer { listener.cancel() }
        try await a.persist(.note("live", "pushed by a's background sync"))
        #expect(try await eventually(timeout: .seconds(300)) { try b.object(container: "notes", id: "live") != nil })
        #expect(try await eventually(timeout: .seconds(300)) { try a.pendingCount == 0 })
        #expect(try await eventually(timeout: .seconds(300)) { sawChange.value.load(ordering: .relaxed) })

        _ = try await server.server.persist(.note("from-server", "written on the server"))
        #expect(try await eventually(timeout: .seconds(300)) { try a.object(container: "notes", id: "from-server") != nil })
        try await server.server.delete(container: "notes", id: "live")
        #expect(try await eventually(timeout: .seconds(300)) { try b.object(container: "notes", id: "live") == nil })
    }
}

/// A flag a listening task raises.
final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}
