import ContentStore
import DataArchive
import Dispatch
import Foundation
import Synchronization

/// The DataArchive facade: a document saved in many versions (most of them repeats), its history
/// read back, trimmed with `keep(upTo:)`, and a second key holding the same bytes stored once.
struct DataArchiveDemo: DemoSection {
    let title = "DataArchive"

    func run(in context: DemoContext) throws {
        let archive = DataArchive(store: context.store)
        let versions = max(10, Int(100 * context.scale))
        let distinct = versions / 10
        let documents = (0 ..< distinct).map { index in
            Data(("{\"title\":\"Quarterly report\",\"revision\":\(index),\"body\":\""
                + String(repeating: "Figures and prose for revision \(index). ", count: 200) + "\"}").utf8)
        }

        let before = try context.store.statistics().blobCount
        try context.step("save", {
            try Self.wait {
                for version in 0 ..< versions {
                    try await archive.archiveCurrent(andSet: documents[version % distinct], forKey: "demo/report.json")
                }
            }
            return try context.store.statistics().blobCount - before
        }, describe: { newBlobs, elapsed in
            ("\(versions) versions (\(distinct) distinct contents), one durable commit each, in \(Format.duration(elapsed)) "
                + "→ \(newBlobs) new blobs", ["versions": Double(versions), "newBlobs": Double(newBlobs), "seconds": elapsed.inSeconds])
        })

        let history = try context.step("history", {
            try Self.wait { try await archive.allVersions(forKey: "demo/report.json") }
        }, describe: { history, elapsed in
            ("current + \(history.count - 1) archived versions read from one snapshot in \(Format.duration(elapsed))",
             ["versions": Double(history.count)])
        })
        guard history.first == documents[(versions - 1) % distinct] else {
            throw DemoFailure(description: "the archive's current version is not the last one saved")
        }

        try context.step("keep", {
            try Self.wait {
                try await archive.keep(upTo: 5, archivesForKey: "demo/report.json")
                try await archive.set(documents[0], forKey: "demo/copy.json")
                return try await archive.allVersions(forKey: "demo/report.json").count
            }
        }, describe: { remaining, _ in
            ("keep(upTo: 5) → \(remaining) versions; the trimmed ones are garbage for the collection below; "
                + "a second key with identical bytes adds no blob", ["remainingVersions": Double(remaining)])
        })
    }

    /// Runs async work to completion from the demo's synchronous flow.
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let value = try await body()
                outcome.withLock { $0 = .success(value) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}
