import ContentStore
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where output goes: results on stdout, everything else on stderr and only for a person watching.
enum Terminal {
    /// Whether stderr is a terminal (so progress and logs are for a person).
    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    private static let bootstrapped = Mutex(false)

    /// Sends swift-log output to stderr when a person is watching, and nowhere otherwise, so
    /// nothing a library logs can reach stdout. Only the first call has an effect.
    static func bootstrapLogging(quiet: Bool) {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let toTerminal = !quiet && standardErrorIsTerminal
        LoggingSystem.bootstrap { label in
            toTerminal ? AnyHandler(StreamLogHandler.standardError(label: label)) : AnyHandler(SwiftLogNoOpLogHandler())
        }
    }

    /// A logger for the store: stderr at info level, or silent.
    static func logger(quiet: Bool) -> Logger {
        Logger(label: "contentstore") { label in
            guard !quiet else { return SwiftLogNoOpLogHandler() }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .info
            return handler
        }
    }

    /// Writes a result (and a newline) to stdout.
    static func printResult(_ text: String) {
        FileHandle.standardOutput.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }

    /// Writes `value` as JSON with sorted keys to stdout.
    static func printJSON<Value: Encodable>(_ value: Value) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        var data = try encoder.encode(value)
        data.append(UInt8(ascii: "\n"))
        FileHandle.standardOutput.write(data)
    }

    /// Writes an error message to stderr (always: errors are not progress).
    static func printError(_ message: String, prefixed: Bool = true) {
        let text = prefixed ? "contentstore: error: \(message)" : message
        FileHandle.standardError.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }

    /// Writes a note to stderr, only when a person is watching and JSON was not asked for.
    static func printNote(_ message: String, options: StoreOptions) {
        guard options.showsProgress else { return }
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}

/// Type-erases the two handlers the bootstrap chooses between.
private struct AnyHandler: LogHandler {
    private var base: any LogHandler
    init(_ base: any LogHandler) { self.base = base }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }
    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }
    func log(event: LogEvent) { base.log(event: event) }
}

/// A one-line progress bar on stderr, redrawn at most ten times a second; silent unless enabled.
final class ProgressBar {
    private let enabled: Bool
    private var lastDrawn: ContinuousClock.Instant?
    private var drewSomething = false

    init(enabled: Bool) { self.enabled = enabled }

    /// Shows how far `phase` has come.
    func update(_ label: String, completed: Int, total: Int) {
        guard enabled else { return }
        let now = ContinuousClock.now
        if let lastDrawn, now - lastDrawn < .milliseconds(100), completed < total { return }
        lastDrawn = now
        let width = 30
        let fraction = total > 0 ? min(1, Double(completed) / Double(total)) : 1
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = "\r\u{1B}[2K\(label) [\(bar)] \(Int(fraction * 100))% (\(completed)/\(total))"
        FileHandle.standardError.write(Data(line.utf8))
        drewSomething = true
    }

    /// Shows a maintenance run's progress.
    func update(_ progress: MaintenanceProgress) {
        update(progress.phase.description, completed: progress.completed, total: progress.total)
    }

    /// Clears the line.
    func finish() {
        guard enabled, drewSomething else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
        drewSomething = false
    }
}

/// Human-readable numbers for the text output.
enum Format {
    /// Bytes in binary units: "512 B", "1.5 KiB", "12.3 MiB".
    static func bytes<N: BinaryInteger>(_ value: N) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var amount = Double(value)
        var unit = 0
        while abs(amount) >= 1024 && unit < units.count - 1 {
            amount /= 1024
            unit += 1
        }
        guard unit > 0 else { return "\(value) B" }
        return String(format: amount < 10 ? "%.2f" : amount < 100 ? "%.1f" : "%.0f", amount) + " " + units[unit]
    }

    /// A duration: "850 µs", "12.3 ms", "1.25 s", "3 min 5 s".
    static func duration(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        switch seconds {
        case ..<0.001: return String(format: "%.0f µs", seconds * 1e6)
        case ..<1: return String(format: "%.1f ms", seconds * 1e3)
        case ..<60: return String(format: "%.2f s", seconds)
        default: return "\(Int(seconds) / 60) min \(Int(seconds) % 60) s"
        }
    }

    /// A ratio: "2.83×".
    static func ratio(_ value: Double) -> String { String(format: "%.2f×", value) }

    /// A count with thousands separators: "1,234,567".
    static func count<N: BinaryInteger>(_ value: N) -> String {
        let digits = Array(String(value.magnitude))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }

    /// Bytes per second over a duration: "312 MiB/s".
    static func throughput(_ amount: UInt64, _ duration: Duration) -> String {
        let seconds = duration.inSeconds
        guard seconds > 0 else { return "-" }
        return bytes(UInt64(Double(amount) / seconds)) + "/s"
    }

    /// Rows of `label  value`, the labels padded to one width.
    static func table(_ rows: [(String, String)], indent: String = "") -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { indent + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    }
}

extension Duration {
    /// The duration in seconds, as a `Double` (what the JSON output carries).
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
