import ContentStore
import Foundation
import Testing
@testable import Sync

@Suite("Sync: offline edits and the server winning")
struct SyncConflictTests {
    @Test func offlineWorkIsDurableAndPushedWhenTheServerIsBack() async throws {
        let fixture = SyncFixture()
        let local = try fixture.store("a")
        do {
            let offline = try fixture.client(local, offlineURL, "a")
            try await offline.persist(.note("1", "written offline", attachments: ["image": Data(repeating: 7, count: 1000)]))
            try await offline.persist(.note("2", "also offline"))
            try await offline.delete(container: "notes", id: "2")
            #expect(try offline.pendingCount == 2)
            #expect(try offline.object(container: "notes", id: "1")?.text == "written offline")
            #expect(try offline.object(container: "notes", id: "2")?.isDeleted == true)
            #expect(try offline.object(container: "notes", id: "3") == nil)
            #expect(try offline.objects(in: "notes").map(\.id) == ["1"])
            let error = await #expect(throws: SyncError.self) { try await offline.sync() }
            #expect(error?.code == .unavailable)
            #expect(try offline.pendingCount == 2)
        }

        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let client = try fixture.client(local, server.url, "a")
        let report = try await client.sync()
        #expect(report.pushed == 2)
        #expect(try client.pendingCount == 0)
        #expect(try client.object(container: "notes", id: "2") == nil)
        #expect(try client.object(container: "notes", id: "1")?.revision != nil)
        let other = try fixture.client(try fixture.store("b"), server.url, "b")
        _ = try await other.sync()
        #expect(try other.objects(in: "notes").map(\.text) == ["written offline"])
        #expect(try other.object(container: "notes", id: "1")?.attachments == ["image": Data(repeating: 7, count: 1000)])
    }

    @Test func serverWinsAndTheOverruledVersionIsKept() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        try await a.persist(.note("x", "first"))
        #expect(try await a.sync().pushed == 1)
        #expect(try await b.sync().pulled == 1)
        #expect(try b.object(container: "notes", id: "x")?.text == "first")
        #expect(try b.object(container: "notes", id: "x")?.revision == 1)

        // Both edit offline; a syncs first.
        try await a.persist(.note("x", "a's edit"))
        try await b.persist(.note("x", "b's edit"))
        try await b.persist(.note("y", "only on b"))
        let events = b.events
        #expect(try await a.sync().pushed == 1)
        let report = try await b.sync()
        #expect(report.conflicts == 1)
        #expect(report.pushed == 1)
        #expect(try b.pendingCount == 0)
        #expect(try b.object(container: "notes", id: "x")?.text == "a's edit")
        let conflicts = try b.conflicts()
        #expect(conflicts.count == 1)
        #expect(conflicts.first?.local.text == "b's edit")
        #expect(conflicts.first?.server?.text == "a's edit")
        #expect(conflicts.first?.reason == .overruled)
        var sawConflict = false
        for await event in events {
            if case .conflict(let conflict) = event, conflict.local.text == "b's edit" { sawConflict = true; break }
        }
        #expect(sawConflict)

        // Keeping the local version pushes it as a new change; a gets it.
        try await b.resolve(try #require(conflicts.first), keepingLocal: true)
        #expect(try b.conflicts().isEmpty)
        #expect(try b.pendingCount == 1)
        #expect(try await b.sync().pushed == 1)
        _ = try await a.sync()
        #expect(try a.object(container: "notes", id: "x")?.text == "b's edit")
        #expect(try a.objects(in: "notes").map(\.id) == ["x", "y"])
        await #expect(throws: SyncError.self) { try await b.resolve(conflicts[0], keepingLocal: false) }
    }

    @Test func threeClientsConverge() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let clients = try ["a", "b", "c"].map { try fixture.client(try fixture.store($0), server.url, $0) }
        try await clients[0].persist(.note("shared", "v0"))
        for client in clients { _ = try await client.sync() }

        for (index, client) in clients.enumerated() {
            try await client.persist(.note("shared", "edit \(index)"))
            try await client.persist(.note("own-\(index)", "from \(index)"))
        }
        try await clients[1].delete(container: "notes", id: "own-1")
        var conflicts = 0
        for client in clients { conflicts += try await client.sync().conflicts }
        for client in clients { _ = try await client.sync() }

        #expect(conflicts == 2)
        let expected = try clients[0].objects(in: "notes")
        #expect(expected.map(\.id) == ["own-0", "own-2", "shared"])
        #expect(expected.last?.text == "edit 0")
        for client in clients {
            #expect(try client.objects(in: "notes") == expected)
            #expect(try client.pendingCount == 0)
        }
        #expect(try clients[1].conflicts().map(\.local.text) == ["edit 1"])
        #expect(try clients[2].conflicts().map(\.local.text) == ["edit 2"])
    }

    @Test func concurrentCallersShareRuns() async throws {
        let fixture = SyncFixture()
        let server = try await fixture.startServer(try fixture.store("server"))
        defer { Task { await server.stop() } }
        let a = try fixture.client(try fixture.store("a"), server.url, "a")
        for index in 0 ..< 20 { try await a.persist(.note("\(index)", "body \(index)")) }
        let pushed = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0 ..< 8 { group.addTask { try await a.sync().pushed } }
            return try await group.reduce(0, +)
        }
        #expect(pushed == 20)
        #expect(try a.pendingCount == 0)
        let b = try fixture.client(try fixture.store("b"), server.url, "b")
        #expect(try await b.sync("notes").pulled == 20)
        #expect(try await b.sync("other").pulled == 0)
    }
}
