import ArgumentParser

/// A command-line value that lists several things at once, separated by commas
/// (`--only ContentStore,SQLite`, `--sizes 100000,1000000`); blanks around each item are ignored.
public struct CommaSeparated<Element: LosslessStringConvertible & Sendable>: ExpressibleByArgument, Sendable {
    /// The items, in the order given.
    public var values: [Element]

    /// Parses `argument`; nil (a usage error naming the option) when it is empty or an item does not parse.
    public init?(argument: String) {
        var values: [Element] = []
        for item in argument.split(separator: ",", omittingEmptySubsequences: false) {
            guard let value = Element(String(item).trimmingCharacters(in: .whitespaces)) else { return nil }
            values.append(value)
        }
        guard !values.isEmpty else { return nil }
        self.values = values
    }

    /// The default value's text in `--help`.
    public var defaultValueDescription: String { values.map(String.init(describing:)).joined(separator: ",") }

    /// A list of `values`, as a default.
    public init(_ values: [Element]) { self.values = values }
}

extension CommaSeparated where Element == String {
    /// The names, lowercased: options that name contenders or workloads match without case.
    public var names: Set<String> { Set(values.map { $0.lowercased() }) }
}
