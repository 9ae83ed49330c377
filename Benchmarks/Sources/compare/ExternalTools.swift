import BenchSupport
import Foundation

/// A command-line contender (restic, git for bulk ingest; restic, borg for versions), run as a child process.
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
        guard skipReason == nil, let output = try? run([name == Name.restic ? "version" : "--version"], environment: [:]) else { return "" }
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

    /// The environment every run of the tool gets, with its state (cache, configuration) under `directory`.
    private func environment(_ directory: String) -> [String: String] {
        switch name {
        case Name.restic:
            ["RESTIC_PASSWORD": "benchmark", "RESTIC_CACHE_DIR": directory + "/cache", "RESTIC_PROGRESS_FPS": "0"]
        case Name.borg:
            ["BORG_BASE_DIR": directory + "/base", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
             "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes"]
        default:
            ["GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
             "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_CONFIG_NOSYSTEM": "1", "HOME": directory]
        }
    }

    private func repository(_ directory: String) -> String {
        directory + (name == Name.git ? "/repo.git" : "/repo")
    }

    /// Creates an empty repository under `directory` (not timed by the callers): restic with its
    /// default settings, borg unencrypted (restic cannot turn encryption off; borg's default
    /// repokey mode would add key handling, not storage), git bare.
    func initRepository(in directory: String) throws {
        switch name {
        case Name.restic: try run(["-r", repository(directory), "init"], environment: environment(directory))
        case Name.borg: try run(["init", "--encryption=none", repository(directory)], environment: environment(directory))
        default: try run(["init", "--quiet", "--bare", repository(directory)], environment: environment(directory))
        }
    }

    /// Ingests the corpus into a fresh repository under `directory`; returns the timed seconds.
    /// Repository set-up (`restic init`, `git init`) is not timed.
    func ingest(_ corpus: Corpus, into directory: String) throws -> Double {
        try initRepository(in: directory)
        let environment = environment(directory)
        if name == Name.restic {
            return try measureSeconds {
                try run(["-r", repository(directory), "backup", "--quiet", "--host", "bench", "."], environment: environment, directory: corpus.root)
            }
        }
        let base = ["--git-dir=" + repository(directory), "--work-tree=" + corpus.root]
        return try measureSeconds {
            try run(base + ["add", "--all", "."], environment: environment, directory: corpus.root)
            try run(base + ["commit", "--quiet", "-m", "corpus"], environment: environment, directory: corpus.root)
        }
    }

    /// restic only: the seconds of `restic cat config` on the repository under `directory`, a run that
    /// opens the repository and derives its key (scrypt, calibrated by `init` to about half a second)
    /// and does nothing else. Every `restic backup` pays it once.
    func keyDerivationSeconds(repository directory: String) throws -> Double {
        try measureSeconds { try run(["-r", repository(directory), "cat", "config"], environment: environment(directory)) }
    }

    /// Backs up one file (named relative to its directory) as snapshot/archive number `version` of
    /// the repository under `directory` (restic or borg); returns the seconds. borg compresses
    /// with zstd level 3, like ContentStore; restic uses its default (`auto`: zstd).
    func backup(file: String, version: Int, repository directory: String) throws -> Double {
        let folder = (file as NSString).deletingLastPathComponent, fileName = (file as NSString).lastPathComponent
        let arguments = name == Name.restic
            ? ["-r", repository(directory), "backup", "--quiet", "--host", "bench", fileName]
            : ["create", "--compression", "zstd,3", repository(directory) + "::v\(version)", fileName]
        return try measureSeconds { try run(arguments, environment: environment(directory), directory: folder) }
    }

    /// Bytes the repository occupies (caches excluded).
    func repositorySize(_ directory: String) -> UInt64 {
        POSIX.diskUsage(repository(directory))
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
