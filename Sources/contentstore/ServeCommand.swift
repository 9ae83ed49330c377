import ArgumentParser
import ContentStore
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Sync
import Synchronization

/// `contentstore serve --port N`: serves the store to Sync clients over HTTP until SIGINT or SIGTERM.
struct ServeCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the store to Sync clients over HTTP (the API in Docs/sync.md) until SIGINT or SIGTERM.",
        discussion: """
            Creates the store if it does not exist. Bearer tokens come from $CONTENTSTORE_SYNC_TOKENS \
            (comma-separated), never from the command line, where other users could read them; without \
            tokens every request is accepted, so bind to a public address only with tokens set.
            """)

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "The port to listen on (0: any free port, printed at start).")
    var port: Int = 8080

    @Option(name: .long, help: "The address to bind.")
    var host: String = "127.0.0.1"

    @Option(name: .long, help: ArgumentHelp("The largest blob accepted, in bytes.", valueName: "bytes"))
    var maxBlobSize: Int = SyncServerConfiguration().maximumBlobSize

    func validate() throws {
        guard (0 ... 65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
        guard maxBlobSize > 0 else { throw ValidationError("--max-blob-size must be positive") }
    }

    func run() throws {
        let store = try options.openStore()
        defer { try? store.close() }
        var configuration = SyncServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.maximumBlobSize = maxBlobSize
        configuration.tokens = Set((ProcessInfo.processInfo.environment["CONTENTSTORE_SYNC_TOKENS"] ?? "")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        configuration.logger = Terminal.logger(quiet: !options.showsProgress)
        let server = SyncServer(store: store, configuration: configuration)
        let json = options.json
        let path = options.storePath
        let tokens = configuration.tokens.count
        let host = configuration.host, logger = configuration.logger
        try Self.wait {
            let group = ServiceGroup(configuration: .init(
                services: [.init(service: server)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            async let running: Void = group.run()
            let bound = try await server.port
            if json {
                try Terminal.printJSON(["port": "\(bound)", "host": host, "store": path])
            } else {
                Terminal.printResult("serving \(path) on http://\(host):\(bound) "
                    + (tokens == 0 ? "(no tokens: every request accepted)" : "(bearer tokens required: \(tokens) accepted)"))
            }
            try await running
        }
    }

    /// Runs async work to completion from the command's synchronous flow.
    static func wait(_ body: @escaping @Sendable () async throws -> Void) throws {
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                try await body()
                outcome.withLock { $0 = .success(()) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0! }.get()
    }
}
