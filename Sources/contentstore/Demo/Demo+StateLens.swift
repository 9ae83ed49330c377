import ContentStore
import Foundation
import StateLens
import Synchronization

/// The StateLens facade: an app's settings changed through lenses of their parts from many threads,
/// a watcher that hears only its own part, default promotion, a large catalog whose one-field
/// update stores a few small blobs, and a kept version restored.
struct StateLensDemo: DemoSection {
    let title = "StateLens"

    struct Protection: Codable, Sendable, Equatable {
        var enabled: Bool
        var passcode: String?
    }

    struct Settings: Codable, Sendable, Equatable {
        var theme = "light"
        var launches = 0
        var protection: Protection?
        var catalog: [String] = []
    }

    func run(in context: DemoContext) throws {
        var configuration = LensStore<Settings>.Configuration()
        configuration.keptVersions = 3
        let settings = try LensStore(store: context.store, name: "demo/settings", default: Settings(), configuration: configuration)
        let threads = 8
        let updates = max(10, Int(25 * context.scale))

        let heard = try context.step("update", {
            let themeChanges = ThemeWatcher(settings.root.theme.readOnly)
            let lens = settings.root.launches
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0 ..< updates { try? lens.update { $0 += 1 } }
            }
            try settings.root.theme.set("dark")
            return themeChanges.finish(expecting: 2)
        }, describe: { heard, elapsed in
            ("\(threads) threads × \(updates) updates of `launches` through its lens, one durable commit each, in "
                + "\(Format.duration(elapsed)); a watcher of `theme` heard \(heard) values (the current one and one change), none of the launches",
             ["updates": Double(threads * updates), "seconds": elapsed.inSeconds])
        })
        guard settings.value.launches == threads * updates, heard == 2 else {
            throw DemoFailure(description: "StateLens lost an update or notified an unchanged part")
        }

        try context.step("promote", {
            try settings.root.protection.defaulting(to: Protection(enabled: false, passcode: nil)).enabled.set(true)
        }, describe: { _, _ in
            ("writing `protection.enabled` through a default stored the default with the change: "
                + "\(settings.value.protection.map { "\($0)" } ?? "nil")", [:])
        })

        let added = try context.step("large", {
            try settings.root.catalog.set((0 ..< 2000).map { "catalog entry \($0): " + String(repeating: "·", count: 400) })
            let before = try context.store.statistics().logicalBytes
            try settings.root.catalog.update { $0[1000] = "catalog entry 1000: changed" }
            return try context.store.statistics().logicalBytes - before
        }, describe: { added, elapsed in
            ("a ~1.6 MB state; changing one entry stored \(Format.bytes(added)) of new blobs (only the chunks around it)",
             ["bytesAdded": Double(added)])
        })
        guard added < 256 * 1024 else { throw DemoFailure(description: "StateLens re-stored the whole state for one field") }

        try context.step("restore", {
            let versions = try settings.versions()
            try settings.restore(versions[versions.count - 1])
            return versions.count
        }, describe: { count, _ in
            ("\(count) versions listed (current + 3 kept); the oldest restored as a new update; older versions' blobs are garbage for the collection below",
             ["versions": Double(count)])
        })
    }
}

/// Counts what a read-only lens's `values()` yields, on a task of its own.
private final class ThemeWatcher: Sendable {
    private let count = Mutex(0)
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ lens: Lens<String>) {
        let stream = lens.values()
        task.withLock { $0 = Task { [self] in for await _ in stream { count.withLock { $0 += 1 } } } }
    }

    /// Waits (up to 5 s) for `expected` values, stops watching, and returns how many arrived.
    func finish(expecting expected: Int) -> Int {
        let deadline = Date().addingTimeInterval(5)
        while count.withLock({ $0 }) < expected, Date() < deadline { usleep(1000) }
        usleep(20_000)   // room for a wrong extra notification to show
        task.withLock { $0?.cancel() }
        return count.withLock { $0 }
    }
}
