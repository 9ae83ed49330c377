import ArgumentParser
import Foundation

/// A duration on the command line: a number and a unit — `0`, `500ms`, `30s`, `10m`, `1h`, `2d`,
/// `1w`, `1.5h`. A bare number is seconds.
struct DurationArgument: ExpressibleByArgument, Hashable, CustomStringConvertible {
    var duration: Duration
    private var text: String

    init?(argument: String) {
        let trimmed = argument.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(suffix: String, seconds: Double)] = [
            ("ms", 0.001), ("s", 1), ("m", 60), ("min", 60), ("h", 3600), ("d", 86400), ("w", 604_800),
        ]
        // Longest suffix first, so "ms" is not read as "m" and "min" not as "m".
        var number = Substring(trimmed)
        var scale: Double = 1
        for unit in units.sorted(by: { $0.suffix.count > $1.suffix.count }) where trimmed.hasSuffix(unit.suffix) {
            number = trimmed.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }),
              let value = Double(number), value.isFinite, value >= 0, value * scale < 1e15
        else { return nil }
        duration = .milliseconds(Int64((value * scale * 1000).rounded()))
        text = argument
    }

    var description: String { text }

    static var defaultCompletionKind: CompletionKind { .default }
}
