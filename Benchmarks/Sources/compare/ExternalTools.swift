import BenchSupport
import Foundation

/// A command-line contender for bulk ingest (restic, git), run as a child process.
struct ExternalTool {
    var name: String
    var executable: String
    /// Why it is not run, when it is not.
    var skipReason: String?

    static func find(_ command: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(command)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    static func locate(_ command: String, name: String) -> ExternalTool {
        if let path = find(command) { return ExternalTool(name: name, executable: path) }
        return ExternalTool(name: name, executable: command,
                            skipReason: "`\(command)` is not installed (make compare installs it with apt-get where it can)")
    }

    /// `<tool> --version`'s first line.
    var version: String {
        guard skipReason == nil, let output = try? run([name == "git" ? "--version" : "version"], environment: [:]) else { return "" }
        return output.split(separator: "\n").first.map(String.init) ?? ""
    }

    /// Runs the tool; throws with its stderr when it fails. Returns stdout.
    @discardableResult
    func run(_ arguments: [String], environment: [String: String], directory: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Drain both pipes while the child runs, so a chatty tool cannot block on a full pipe.
        let output = DrainedPipe(out), errors = DrainedPipe(err)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw VerificationFailed(description: "\(name) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(errors.text.suffix(500))")
        }
        return output.text
    }

    /// Ingests the corpus into a fresh repository under `directory`; returns the timed seconds.
    /// Repository set-up (`restic init`, `git init`) is not timed.
    func ingest(_ corpus: Corpus, into directory: String) throws -> Double {
        switch name {
        case "restic":
            let environment = ["RESTIC_PASSWORD": "benchmark", "RESTIC_CACHE_DIR": directory + "/cache", "RESTIC_PROGRESS_FPS": "0"]
            try run(["-r", directory + "/repo", "init"], environment: environment)
            return try measureSeconds {
                try run(["-r", directory + "/repo", "backup", "--quiet", "--host", "bench", "."], environment: environment, directory: corpus.root)
            }
        default:
            let gitDir = directory + "/repo.git"
            let base = ["--git-dir=" + gitDir, "--work-tree=" + corpus.root]
            let environment = ["GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
                               "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
                               "GIT_CONFIG_NOSYSTEM": "1", "HOME": directory]
            try run(["init", "--quiet", "--bare", gitDir], environment: environment)
            return try measureSeconds {
                try run(base + ["add", "--all", "."], environment: environment, directory: corpus.root)
                try run(base + ["commit", "--quiet", "-m", "corpus"], environment: environment, directory: corpus.root)
            }
        }
    }

    /// Bytes the repository occupies (restic's cache excluded).
    func repositorySize(_ directory: String) -> UInt64 {
        POSIX.diskUsage(directory + (name == "restic" ? "/repo" : "/repo.git"))
    }
}

/// Reads a pipe to its end on a background thread.
final class DrainedPipe: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    /// Waits for the end of the stream.
    var text: String {
        done.wait()
        done.signal()
        return String(decoding: data, as: UTF8.self)
    }
}
