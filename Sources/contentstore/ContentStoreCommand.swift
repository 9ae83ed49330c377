import ArgumentParser
import ContentStore
import Foundation

/// `contentstore`: maintenance and inspection of a ContentStore store.
///
/// Results go to stdout (JSON with sorted keys under `--json`); progress and logs go to stderr,
/// only when it is a terminal and never with `--json`. Exit codes: 0 success, 1 error,
/// 2 `verify` found damage, 3 the store is locked by another process.
@main
struct ContentStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contentstore",
        abstract: "Maintain and inspect a ContentStore store.",
        discussion: """
            The store is --store PATH, or $CONTENTSTORE_PATH, or ./contentstore-data.
            A cluster store is --store postgres://… with --endpoint URL and --bucket NAME (or $CONTENTSTORE_S3_ENDPOINT,
            $CONTENTSTORE_S3_BUCKET), credentials from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY.
            Exit codes: 0 success, 1 error, 2 verify found damage, 3 the store is locked by another process.
            """,
        subcommands: [
            GarbageCollectCommand.self, VerifyCommand.self, StatsCommand.self, CheckpointCommand.self,
            PutCommand.self, GetCommand.self, DemoCommand.self, ServeCommand.self,
        ])

    /// Parses and runs, then exits with the contract's codes rather than ArgumentParser's own
    /// (which uses 64 for usage errors).
    static func main() {
        Foundation.exit(run(Array(CommandLine.arguments.dropFirst())))
    }

    /// Runs one invocation and returns its exit code.
    static func run(_ arguments: [String]) -> Int32 {
        do {
            var command = try parseAsRoot(arguments)
            let quiet = (command as? any StoreCommand)?.options.json ?? false
            Terminal.bootstrapLogging(quiet: quiet)
            try command.run()
            return ExitStatus.success
        } catch {
            return report(error)
        }
    }

    /// Prints `error` where it belongs and returns the exit code it maps to.
    static func report(_ error: any Error) -> Int32 {
        switch error {
        case let error as StoreError:
            Terminal.printError(error.description)
            return error.code == .locked ? ExitStatus.locked : ExitStatus.failure
        case let error as CommandFailure:
            Terminal.printError(error.message)
            return error.status
        case let error as ExitCode:
            return error.rawValue
        default:
            let status = exitCode(for: error)
            let message = fullMessage(for: error)
            if status == .success {
                // --help and friends: a result like any other, on stdout.
                if !message.isEmpty { Terminal.printResult(message) }
                return ExitStatus.success
            }
            if !message.isEmpty { Terminal.printError(message, prefixed: false) }
            return ExitStatus.failure
        }
    }
}

/// The exit codes of the contract.
enum ExitStatus {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let damaged: Int32 = 2
    static let locked: Int32 = 3
    /// Ctrl-C stopped a remote operation (128 + SIGINT, as shells report an interrupted command).
    static let interrupted: Int32 = 130
}

/// A failure the command itself detects, with the exit code it maps to.
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var status: Int32 = ExitStatus.failure

    var description: String { message }
}
