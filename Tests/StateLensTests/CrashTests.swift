#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import StateLens
import Testing

/// A writer process killed (SIGKILL) in the middle of updates reopens to the value of its last
/// acknowledged update or the one after it, never anything between.
///
/// The child is a Swift Testing exit test (the test binary run again as a real process): it updates
/// a large state in a loop (a counter, and the body of one item that embeds the same counter, so a
/// mix of two versions shows), records each acknowledged counter in a side file, and is killed by
/// SIGKILL at a random moment.
@Suite struct CrashTests {
    @Test(arguments: [20, 60, 150])
    func aKilledWriterReopensToTheOldOrTheNewValue(delayMilliseconds: Int) async throws {
        let directory = TemporaryDirectory()
        let storePath = directory.store.path
        let progressPath = directory.url.appendingPathComponent("acknowledged").path
        do {
            let store = try Store(at: directory.store)
            try await LensStore(store: store, name: "catalog", default: Catalog()).root.set(Catalog.large(count: 200))
            try await store.close()
        }

        await #expect(processExitsWith: .signal(SIGKILL)) { [storePath = storePath as String, progressPath = progressPath as String, delayMilliseconds = delayMilliseconds as Int] in
            let store = try Store(at: URL(fileURLWithPath: storePath))
            let state = try LensStore(store: store, name: "catalog", default: Catalog())
            Thread.detachNewThread {
                usleep(useconds_t(delayMilliseconds * 1000))
                kill(getpid(), SIGKILL)
            }
            for round in 1 ... 1_000_000 {
                try state.root.update { catalog in
                    catalog.version = round
                    catalog.items[round % catalog.items.count].notes = String(repeating: "round \(round) ", count: 50)
                    catalog.items[0].name = "round \(round)"
                }
                // Atomically (a temporary file renamed over it): a plain write truncates first, and a
                // kill between the truncation and the write would leave no count at all.
                try Data("\(round)".utf8).write(to: URL(fileURLWithPath: progressPath), options: .atomic)
            }
        }

        let acknowledged = (try? String(contentsOfFile: progressPath, encoding: .utf8)).flatMap { Int($0) } ?? 0
        let store = try Store(at: directory.store)
        defer { try? store.close() }
        let value = try LensStore(store: store, name: "catalog", default: Catalog()).value
        // The side file is written after `update` returns, so it may lag one behind.
        #expect(value.version == acknowledged || value.version == acknowledged + 1, "version \(value.version), \(acknowledged) acknowledged")
        if value.version > 0 {
            #expect(value.items[0].name == "round \(value.version)")
            #expect(value.items[value.version % value.items.count].notes == String(repeating: "round \(value.version) ", count: 50))
        }
        #expect(try await store.verify(VerificationOptions()).isClean)
    }
}
