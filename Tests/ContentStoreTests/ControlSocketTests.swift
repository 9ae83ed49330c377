import Foundation
import Logging
import Testing
@testable import ContentStore
import TestThreads

/// The control socket's life in one process; Tests/contentstoreTests/LiveMaintenanceTests.swift has
/// the commands in other processes.
@Suite(.blocking) struct ControlSocketTests {
    @Test func socketExistsWhileOpenWithModeSixHundred() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        let path = dir.store.appendingPathComponent(ControlProtocol.socketName).path
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.type] as? FileAttributeType == .typeSocket)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let response = try ControlClient.send(ControlRequest(command: .stats), to: dir.store)
        #expect(response.stats?.recordCount == 0)
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ControlClient.Unanswered.self) { try ControlClient.send(ControlRequest(command: .stats), to: dir.store) }
    }

    @Test func disabledByConfiguration() throws {
        let dir = TemporaryDirectory()
        var configuration = Store.Configuration.testing()
        configuration.controlSocket = false
        let store = try Store(at: dir.store, configuration: configuration)
        #expect(!FileManager.default.fileExists(atPath: dir.store.appendingPathComponent(ControlProtocol.socketName).path))
        try store.close()
    }

    /// A path longer than a Unix socket address holds: logged, and the store opens and works anyway.
    @Test func socketThatCannotBeCreatedIsLoggedAndTheStoreOpens() throws {
        let dir = TemporaryDirectory()
        let deep = dir.url.appendingPathComponent(String(repeating: "d", count: 120)).appendingPathComponent("store")
        let logs = CapturedLogs()
        var configuration = Store.Configuration.testing()
        configuration.logger = Logger(label: "test") { _ in logs }
        let store = try Store(at: deep, configuration: configuration)
        try store.write { tx in try tx.setRecord(Record(value: Data("v".utf8)), forKey: "k") }
        #expect(try store.record(forKey: "k") != nil)
        #expect(logs.entries.contains { $0.level == .warning && $0.message == "control socket not created; live maintenance is unavailable" })
        try store.close()
    }

    /// Cancelling over the protocol stops a remote operation with `cancelled`; an unknown version is refused.
    @Test func versionIsChecked() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing())
        var request = ControlRequest(command: .stats)
        request.version = 99
        let error = try #require(throws: StoreError.self) { try ControlClient.send(request, to: dir.store) }
        #expect(error.message.contains("version 1, not 99"))
        try store.close()
    }
}
