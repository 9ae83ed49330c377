import ArgumentParser
import ContentStore
import ContentStoreCluster
import Foundation

/// Options every subcommand shares: where the store is and how results are printed.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store directory, or postgres://… for a cluster store.",
                                            discussion: "Default: $CONTENTSTORE_PATH, or ./contentstore-data.", valueName: "path"))
    var store: String?

    @Option(name: .long, help: ArgumentHelp("A cluster store's S3-compatible object store, http(s)://host:port.",
                                            discussion: "Default: $CONTENTSTORE_S3_ENDPOINT. Credentials: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY.",
                                            valueName: "url"))
    var endpoint: String?

    @Option(name: .long, help: ArgumentHelp("A cluster store's bucket.", discussion: "Default: $CONTENTSTORE_S3_BUCKET.", valueName: "name"))
    var bucket: String?

    @Flag(name: .long, help: "Print the result as JSON with sorted keys; nothing on stderr but errors.")
    var json = false

    /// The store directory: `--store`, else `$CONTENTSTORE_PATH`, else `./contentstore-data`.
    var storePath: String {
        if let store { return store }
        if let path = ProcessInfo.processInfo.environment["CONTENTSTORE_PATH"], !path.isEmpty { return path }
        return "./contentstore-data"
    }

    var storeURL: URL { URL(fileURLWithPath: storePath) }

    /// Whether the store is a cluster (a PostgreSQL URL rather than a directory).
    var isCluster: Bool { storePath.hasPrefix("postgres://") || storePath.hasPrefix("postgresql://") }

    /// The cluster the options name: the database URL, the endpoint and the bucket (options, else
    /// the environment), credentials from the environment.
    func clusterConfiguration() throws -> ClusterConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let endpointText = endpoint ?? environment["CONTENTSTORE_S3_ENDPOINT"], let endpointURL = URL(string: endpointText),
              endpointURL.scheme == "http" || endpointURL.scheme == "https" else {
            throw CommandFailure(message: "a cluster store needs --endpoint http(s)://host:port (or CONTENTSTORE_S3_ENDPOINT)")
        }
        guard let bucketName = bucket ?? environment["CONTENTSTORE_S3_BUCKET"], !bucketName.isEmpty else {
            throw CommandFailure(message: "a cluster store needs --bucket NAME (or CONTENTSTORE_S3_BUCKET)")
        }
        return ClusterConfiguration(databaseURL: storePath, objectStoreEndpoint: endpointURL, bucket: bucketName)
    }

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
        // A cluster is shared: no other process holds it, and its database says what it is.
        if isCluster { return try openStore(configure) }
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
        if isCluster { return try Store(cluster: clusterConfiguration(), configuration: configuration) }
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
