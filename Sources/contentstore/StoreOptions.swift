import ArgumentParser
import ContentStore
import Foundation

/// Options every subcommand shares: where the store is and how results are printed.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store directory.", discussion: "Default: $CONTENTSTORE_PATH, or ./contentstore-data.", valueName: "path"))
    var store: String?

    @Flag(name: .long, help: "Print the result as JSON with sorted keys; nothing on stderr but errors.")
    var json = false

    /// The store directory: `--store`, else `$CONTENTSTORE_PATH`, else `./contentstore-data`.
    var storePath: String {
        if let store { return store }
        if let path = ProcessInfo.processInfo.environment["CONTENTSTORE_PATH"], !path.isEmpty { return path }
        return "./contentstore-data"
    }

    var storeURL: URL { URL(fileURLWithPath: storePath) }

    /// Whether progress and logs may go to stderr.
    var showsProgress: Bool { !json && Terminal.standardErrorIsTerminal }

    /// A configuration whose logger writes to stderr only when progress may be shown.
    func configuration() -> Store.Configuration {
        var configuration = Store.Configuration()
        configuration.logger = Terminal.logger(quiet: !showsProgress)
        // A command holds the store only briefly; it serves no other command.
        configuration.controlSocket = false
        return configuration
    }

    /// Opens the store, which must exist: a maintenance command given a mistyped path must not
    /// create an empty store there.
    func openExistingStore(_ configure: (inout Store.Configuration) -> Void = { _ in }) throws -> Store {
        let format = storeURL.appendingPathComponent("FORMAT").path
        guard FileManager.default.fileExists(atPath: format) else {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: storePath, isDirectory: &isDirectory)
            throw CommandFailure(message: exists && isDirectory.boolValue
                ? "\(storePath) is not a ContentStore store (it has no FORMAT file)"
                : "there is no store at \(storePath) (pass --store PATH or set CONTENTSTORE_PATH)")
        }
        return try openStore(configure)
    }

    /// Opens the store, creating it if the directory is missing or empty.
    func openStore(_ configure: (inout Store.Configuration) -> Void = { _ in }) throws -> Store {
        var configuration = configuration()
        configure(&configuration)
        return try Store(at: storeURL, configuration: configuration)
    }

    /// Prints `value` as JSON (with `--json`) or `text()` otherwise, on stdout.
    func emit<Value: Encodable>(_ value: Value, text: () -> String) throws {
        if json {
            try Terminal.printJSON(value)
        } else {
            Terminal.printResult(text())
        }
    }
}

/// A subcommand that works on a store, so `main` can see `--json` before anything runs.
protocol StoreCommand: ParsableCommand {
    var options: StoreOptions { get }
}
