import Foundation

/// The counts a reliability run reports (kills survived, sync points swept, faults injected), so
/// the figures in Docs/reliability.md are reproduced by running the tests rather than counted by
/// hand. Each is printed as one `reliability:` line and written as JSON to
/// `$RELIABILITY_REPORT_DIR/<name>.json`, by default `reliability/` beside the test executable
/// (`.build/debug/reliability/`).
enum ReliabilityReport {
    static var directory: URL {
        if let path = ProcessInfo.processInfo.environment["RELIABILITY_REPORT_DIR"], !path.isEmpty {
            return URL(fileURLWithPath: path, isDirectory: true)
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("reliability", isDirectory: true)
    }

    /// Prints and records `counts` under `name`; `summary` is the human-readable line.
    static func record(_ name: String, _ counts: [String: Int], summary: String) {
        print("reliability: \(summary)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let json = try JSONSerialization.data(withJSONObject: counts, options: [.prettyPrinted, .sortedKeys])
            try json.write(to: directory.appendingPathComponent("\(name).json"), options: .atomic)
        } catch {
            // The counts are a by-product of the test: failing to save them fails nothing the test checks.
            print("reliability: could not record \(name): \(error)")
        }
    }
}
