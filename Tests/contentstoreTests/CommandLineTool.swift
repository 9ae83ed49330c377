import Foundation
import Testing

/// The built `contentstore` executable (or a test workload), run as a child process.
enum CommandLineTool {
    /// Where the `contentstore` executable is (see ``locate(_:overriddenBy:)``).
    static let executable = locate("contentstore", overriddenBy: "CONTENTSTORE_BINARY")
    /// Where the collection crash test's workload is (Tests/CollectionWorkload).
    static let collectionWorkload = locate("CollectionWorkload", overriddenBy: "COLLECTION_WORKLOAD_BINARY")

    /// Where the executable `name` is: `$variable`, else beside the test bundle (SwiftPM puts both
    /// in the same build directory), else in this package's `.build`.
    static func locate(_ name: String, overriddenBy variable: String) -> URL? {
        let manager = FileManager.default
        var candidates: [URL] = []
        if let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty {
            candidates.append(URL(fileURLWithPath: path))
        }
        var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
        for bundle in [Bundle.main] + Bundle.allBundles {
            directories.append(bundle.bundleURL)
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        // Tests/contentstoreTests/<this file> → the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for configuration in ["debug", "release"] {
            directories.append(root.appendingPathComponent(".build").appendingPathComponent(configuration))
        }
        candidates += directories.map { $0.appendingPathComponent(name) }
        return candidates.first { url in
            var isDirectory: ObjCBool = false
            return manager.fileExists(atPath: url.path, isDirectory: &isDirectory) && !isDirectory.boolValue
                && manager.isExecutableFile(atPath: url.path)
        }
    }

    /// What a finished run left behind.
    struct Outcome {
        var status: Int32
        var stdout: Data
        var stderr: String
        var output: String { String(decoding: stdout, as: UTF8.self) }

        /// The stdout parsed as a JSON object.
        func json() throws -> [String: Any] {
            let object = try JSONSerialization.jsonObject(with: stdout)
            return try #require(object as? [String: Any], "stdout is not a JSON object: \(output)")
        }
    }

    /// A started child process whose output goes to files.
    final class Child {
        let process: Process
        private let stdoutURL: URL
        private let stderrURL: URL

        fileprivate init(process: Process, stdoutURL: URL, stderrURL: URL) {
            self.process = process
            self.stdoutURL = stdoutURL
            self.stderrURL = stderrURL
        }

        var pid: Int32 { process.processIdentifier }

        /// Waits for the child and collects its output.
        func wait() -> Outcome {
            process.waitUntilExit()
            let stdout = (try? Data(contentsOf: stdoutURL)) ?? Data()
            let stderr = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(at: stdoutURL)
            try? FileManager.default.removeItem(at: stderrURL)
            return Outcome(status: process.terminationStatus, stdout: stdout, stderr: stderr)
        }

        /// Whether the child ended by a signal rather than by exiting.
        var wasKilled: Bool { process.terminationReason == .uncaughtSignal }
    }

    /// Starts `contentstore arguments...` (or `program arguments...`). Output goes to temporary files,
    /// so a chatty child can never block on a full pipe.
    static func start(_ arguments: [String], program: URL? = nil, stdin: Data? = nil, environment: [String: String] = [:]) throws -> Child {
        let executable = try #require(program ?? executable, "the executable was not found; build it (swift build) or set CONTENTSTORE_BINARY")
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "CONTENTSTORE_PATH")
        env.merge(environment) { $1 }
        process.environment = env
        let scratch = FileManager.default.temporaryDirectory
        let id = UUID().uuidString
        let stdoutURL = scratch.appendingPathComponent("cs-cli-\(id).out")
        let stderrURL = scratch.appendingPathComponent("cs-cli-\(id).err")
        for url in [stdoutURL, stderrURL] {
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
            }
        }
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        if let stdin {
            let input = scratch.appendingPathComponent("cs-cli-\(id).in")
            try stdin.write(to: input)
            process.standardInput = try FileHandle(forReadingFrom: input)
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        try process.run()
        return Child(process: process, stdoutURL: stdoutURL, stderrURL: stderrURL)
    }

    /// Runs `contentstore arguments...` to completion.
    static func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) throws -> Outcome {
        try start(arguments, stdin: stdin, environment: environment).wait()
    }
}
