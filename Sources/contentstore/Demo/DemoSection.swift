import ContentStore
import Foundation

/// One part of `contentstore demo`: exercises a layer of the product on the demo store and reports
/// what it did through the context.
///
/// To add a part, write a type conforming to this protocol in its own file (`Demo+Warehouse.swift`,
/// `Demo+DataArchive.swift`, ...) and list it in ``DemoCommand/sections``. Sections run in order on
/// one store; afterwards the demo collects garbage, verifies and reads back every referenced blob,
/// so whatever a section leaves referenced is checked too.
protocol DemoSection: Sendable {
    /// The heading printed above the section's steps.
    var title: String { get }
    /// Does the section's work. Keys should start with a prefix of the section's own.
    func run(in context: DemoContext) throws
}

/// What sections share: the store, the seed, the scale, and the report being built.
final class DemoContext {
    /// The demo store. ``reopen()`` replaces it.
    private(set) var store: Store
    /// Where the demo store lives.
    let storeURL: URL
    /// Makes the corpus (and every random choice) the same on every run.
    let seed: UInt64
    /// Multiplies the amount of data; 1 is the default demo.
    let scale: Double
    private let configuration: Store.Configuration
    private let printsAsItGoes: Bool
    private(set) var report = DemoReport.Section(title: "", steps: [])
    private(set) var sections: [DemoReport.Section] = []

    init(store: Store, storeURL: URL, configuration: Store.Configuration, seed: UInt64, scale: Double, printsAsItGoes: Bool) {
        self.store = store
        self.storeURL = storeURL
        self.configuration = configuration
        self.seed = seed
        self.scale = scale
        self.printsAsItGoes = printsAsItGoes
    }

    /// Runs `body` as a section titled `title`.
    func section(_ title: String, _ body: () throws -> Void) throws {
        report = DemoReport.Section(title: title, steps: [])
        if printsAsItGoes { Terminal.printResult("\n" + title) }
        try body()
        sections.append(report)
    }

    /// Runs and times one step, then reports it: `describe` turns the result and the time into
    /// the line printed and the metrics put in the JSON report.
    @discardableResult
    func step<T>(_ name: String, _ body: () throws -> T, describe: (T, Duration) -> (detail: String, metrics: [String: Double])) rethrows -> T {
        let started = ContinuousClock.now
        let result = try body()
        let elapsed = ContinuousClock.now - started
        let (detail, metrics) = describe(result, elapsed)
        report.steps.append(DemoReport.Step(name: name, detail: detail, seconds: elapsed.inSeconds, metrics: metrics))
        if printsAsItGoes { Terminal.printResult("  " + name.padding(toLength: 13, withPad: " ", startingAt: 0) + " " + detail) }
        return result
    }

    /// Closes the store and opens it again (recovering from the checkpoint and WAL), timed as a step.
    func reopen(_ name: String = "reopen") throws {
        try step(name, {
            try store.close()
            store = try Store(at: storeURL, configuration: configuration)
        }, describe: { _, elapsed in
            ("closed and reopened in \(Format.duration(elapsed)) (checkpoint + WAL replay)", [:])
        })
    }
}

/// What `contentstore demo --json` prints.
struct DemoReport: Encodable {
    struct Step: Encodable {
        var name: String
        var detail: String
        var seconds: Double
        var metrics: [String: Double]
    }

    struct Section: Encodable {
        var title: String
        var steps: [Step]
    }

    var store: String
    var seed: UInt64
    var sections: [Section]
    var garbageCollection: GarbageCollectionReport
    var verification: VerificationReport
    var statistics: Statistics
    var seconds: Double
}
