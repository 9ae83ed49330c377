import Foundation
import Testing
@testable import ContentStore
import TestThreads

/// A store held open by another process: every command exits 3 and names the holder.
@Suite(.blocking) struct LockTests {
    @Test func everyCommandExitsThreeNamingTheProcess() throws {
        let dir = ScratchDirectory()
        let blobs = try makeStore(at: dir.store, count: 2)
        let digest = try #require(blobs["k0"]).0
        let file = dir.url.appendingPathComponent("f")
        try Data("f".utf8).write(to: file)

        // This test process is "another process" to the children; without a control socket, nothing
        // answers them (LiveMaintenanceTests has the process that does).
        var configuration = Store.Configuration()
        configuration.controlSocket = false
        let holder = try Store(at: dir.store, configuration: configuration)
        defer { try? holder.close() }
        let commands: [[String]] = [
            ["stats"], ["gc"], ["gc", "--dry-run"], ["verify"], ["verify", "--read-data"], ["checkpoint"],
            ["put", file.path], ["get", digest.hex], ["stats", "--json"],
        ]
        for command in commands {
            let outcome = try CommandLineTool.run(command + ["--store", dir.store.path])
            #expect(outcome.status == 3, "\(command): \(outcome.stderr)")
            #expect(outcome.stderr.contains("process \(getpid())"), "\(command) names the pid: \(outcome.stderr)")
            #expect(outcome.output.isEmpty, "\(command) prints no result")
        }
        try holder.close()
        #expect(try CommandLineTool.run(["stats", "--store", dir.store.path]).status == 0, "free again once closed")
    }

    @Test func aDemoStoreInUseIsNotDeleted() throws {
        let dir = ScratchDirectory()
        let demo = dir.url.appendingPathComponent("demo")
        try makeStore(at: demo, count: 1)
        let holder = try Store(at: demo)
        defer { try? holder.close() }
        let outcome = try CommandLineTool.run(["demo", "--store", dir.url.path, "--scale", "0.05"])
        #expect(outcome.status == 3)
        #expect(outcome.stderr.contains("process \(getpid())"))
        #expect(try holder.statistics().recordCount == 1)
    }
}
