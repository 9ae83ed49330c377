import ContentStore
import Foundation
import Sync

/// The Sync facade: the demo store served over HTTP on 127.0.0.1 and two clients (each with its own
/// store in a temporary directory) syncing through it: an initial sync where a shared attachment
/// crosses the network once, offline edits of one note on both sides (the server wins, the
/// overruled version is kept as a conflict, then resolved), and a delete reaching the other client.
struct SyncDemo: DemoSection {
    let title = "Sync"

    func run(in context: DemoContext) throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("contentstore-sync-demo-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let count = max(20, Int(200 * context.scale))
        func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T { try DataArchiveDemo.wait(body) }

        let server = SyncServer(store: context.store)
        let running = Task { try await server.run() }
        defer { running.cancel() }
        let url = URL(string: "http://127.0.0.1:\(try wait { try await server.port })")!
        var configuration = SyncConfiguration()
        configuration.syncsAutomatically = false
        let storeA = try Store(at: scratch.appendingPathComponent("a"))
        let storeB = try Store(at: scratch.appendingPathComponent("b"))
        defer { try? storeA.close(); try? storeB.close() }
        let a = try SyncClient(local: storeA, server: url, clientID: "demo-a", configuration: configuration)
        let b = try SyncClient(local: storeB, server: url, clientID: "demo-b", configuration: configuration)
        let logo = Data((0 ..< 256 * 1024).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })

        try context.step("offline", {
            try wait {
                for index in 0 ..< count {
                    try await a.persist(SyncObject(container: "demo/notes", id: String(format: "note-%04d", index),
                                                   body: Data("{\"text\":\"note \(index)\"}".utf8), attachments: ["logo.png": logo]))
                }
                return try a.pendingCount
            }
        }, describe: { pending, elapsed in
            ("\(count) notes persisted on client A, durably, with no server call, in \(Format.duration(elapsed)): \(pending) pending",
             ["pending": Double(pending)])
        })
        try context.step("push", { try wait { try await a.sync() } }, describe: { report, elapsed in
            ("A pushed \(report.pushed) notes sharing one 256 KiB attachment: \(Format.bytes(UInt64(report.bytesSent))) sent "
                + "(the attachment once) in \(Format.duration(elapsed))", ["pushed": Double(report.pushed), "bytesSent": Double(report.bytesSent)])
        })
        try context.step("pull", { try wait { try await b.sync() } }, describe: { report, elapsed in
            ("B pulled \(report.pulled) notes, \(Format.bytes(UInt64(report.bytesReceived))) received, in \(Format.duration(elapsed))",
             ["pulled": Double(report.pulled), "bytesReceived": Double(report.bytesReceived)])
        })
        let (conflicts, winner, kept) = try context.step("conflict", {
            try wait {
                try await a.persist(SyncObject(container: "demo/notes", id: "note-0000", body: Data("A's edit".utf8)))
                try await b.persist(SyncObject(container: "demo/notes", id: "note-0000", body: Data("B's edit".utf8)))
                _ = try await a.sync()
                let report = try await b.sync()
                let conflicts = try b.conflicts()
                let winner = try b.object(container: "demo/notes", id: "note-0000").map { String(decoding: $0.body, as: UTF8.self) }
                for conflict in conflicts { try await b.resolve(conflict, keepingLocal: true) }
                _ = try await b.sync()
                _ = try await a.sync()
                return (report.conflicts, winner ?? "nothing", conflicts.first.map { String(decoding: $0.local.body, as: UTF8.self) } ?? "nothing")
            }
        }, describe: { result, _ in
            ("both edited note-0000 offline, A synced first: B showed \"\(result.1)\" and kept \"\(result.2)\" as a conflict; "
                + "resolved by keeping it, a new change A then pulled", ["conflicts": Double(result.0)])
        })
        guard conflicts == 1, winner == "A's edit", kept == "B's edit" else {
            throw DemoFailure(description: "the sync conflict did not go as the server-wins rule says")
        }
        try context.step("delete", {
            try wait {
                try await a.delete(container: "demo/notes", id: "note-0001")
                _ = try await a.sync()
                _ = try await b.sync()
                return (try b.objects(in: "demo/notes").count, try a.objects(in: "demo/notes") == b.objects(in: "demo/notes"))
            }
        }, describe: { result, _ in
            ("A deleted note-0001 (a tombstone): B has \(result.0) notes; A and B \(result.1 ? "agree" : "DISAGREE")",
             ["notes": Double(result.0)])
        })
    }
}
