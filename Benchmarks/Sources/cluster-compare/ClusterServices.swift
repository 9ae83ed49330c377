import BenchSupport
import Foundation

// Invariant: services this run started are stopped before it exits, on success and on a thrown
// error (an interrupted or crashed run is stopped by `make compare-cluster`'s trap, which runs the
// same `stop`), and a start that fails leaves a reason
// for the report, not a crash.

/// PostgreSQL and the S3 gateway of `Scripts/cluster-services.sh`, started in a scratch directory of
/// this run's own (free ports, so several runs on one machine do not collide).
final class ClusterServices: Sendable {
    let script: String
    let directory: String
    let databaseURL: String
    let endpoint: URL
    let accessKeyID: String
    let secretAccessKey: String

    /// Starts both services; throws with the script's own words when they cannot start.
    init(script: String, directory: String) throws {
        self.script = script
        self.directory = directory
        let (status, errors) = Self.run(script, ["start", directory])
        guard status == 0 else {
            Self.run(script, ["stop", directory])
            throw ServicesUnavailable(reason: "`\(script) start \(directory)` exited \(status): \(errors.suffix(600))")
        }
        let exports = Self.parseExports((try? String(contentsOfFile: directory + "/env", encoding: .utf8)) ?? "")
        guard let url = exports["CONTENTSTORE_TEST_DATABASE_URL"],
              let endpoint = exports["CONTENTSTORE_TEST_S3_ENDPOINT"].flatMap(URL.init(string:)),
              let key = exports["CONTENTSTORE_TEST_S3_ACCESS_KEY_ID"], let secret = exports["CONTENTSTORE_TEST_S3_SECRET_ACCESS_KEY"] else {
            Self.run(script, ["stop", directory])
            throw ServicesUnavailable(reason: "\(directory)/env does not name both services")
        }
        (databaseURL, self.endpoint, accessKeyID, secretAccessKey) = (url, endpoint, key, secret)
        // The harness's own instances read their credentials from the environment, as users' do.
        setenv("AWS_ACCESS_KEY_ID", key, 1)
        setenv("AWS_SECRET_ACCESS_KEY", secret, 1)
    }

    func stop() {
        Progress.log("stopping the services in \(directory)")
        Self.run(script, ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The database URL with another database name.
    func databaseURL(database: String) -> String {
        var components = URLComponents(string: databaseURL)!
        components.path = "/" + database
        return components.string!
    }

    /// The environment worker processes and restic get: the cluster's coordinates and credentials.
    var environment: [String: String] {
        ["CLUSTER_COMPARE_DATABASE_URL": databaseURL, "CLUSTER_COMPARE_S3_ENDPOINT": endpoint.absoluteString,
         "AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey, "AWS_DEFAULT_REGION": "us-east-1"]
    }

    static func parseExports(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("export ") {
            let assignment = line.dropFirst("export ".count)
            guard let equals = assignment.firstIndex(of: "=") else { continue }
            var value = assignment[assignment.index(after: equals)...]
            if value.hasPrefix("'") && value.hasSuffix("'") && value.count >= 2 { value = value.dropFirst().dropLast() }
            values[String(assignment[..<equals])] = String(value)
        }
        return values
    }

    /// Runs the script with its output collected in a file (the script logs to stderr); returns the
    /// status and that output. posix_spawn and waitpid, not Foundation's Process: its
    /// waitUntilExit never saw this script exit once the script had left servers running.
    @discardableResult
    static func run(_ script: String, _ arguments: [String]) -> (Int32, String) {
        let log = NSTemporaryDirectory() + "cluster-compare-services-\(getpid()).log"
        defer { unlink(log) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = (["/bin/bash", script] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, environ)
        guard spawned == 0 else { return (127, "cannot run \(script): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        FileHandle.standardError.write(Data(output.utf8))
        return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), output)
    }
}

struct ServicesUnavailable: Error, CustomStringConvertible {
    var reason: String
    var description: String { reason }
}
