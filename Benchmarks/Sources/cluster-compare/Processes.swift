import Foundation

/// A worker process of this executable, talked to by lines on stdin and stdout.
final class WorkerProcess {
    let process = Process()
    private let input = Pipe(), output = Pipe(), errors = Pipe()
    private var buffer = Data()

    init(_ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["worker"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = input
        process.standardOutput = output
        // CLUSTER_COMPARE_WORKER_LOG=DIR: each worker's stderr (with CLUSTER_COMPARE_LOG_LEVEL=debug,
        // the per-group commit lines) goes to a file there; a pipe nobody drains would block it.
        if let directory = ProcessInfo.processInfo.environment["CLUSTER_COMPARE_WORKER_LOG"] {
            let path = "\(directory)/worker-\(arguments.joined(separator: "-"))-\(UUID().uuidString.prefix(8)).log"
            _ = FileManager.default.createFile(atPath: path, contents: nil)  // if it failed, the open below says why
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        } else {
            process.standardError = errors
        }
        try process.run()
    }

    /// The next line of the worker's stdout; nil at its end.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex ..< newline], as: UTF8.self)
                buffer = Data(buffer[buffer.index(after: newline)...])
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// Waits for a line starting with `prefix`; throws with the worker's stderr if it ends first.
    func expect(_ prefix: String) throws -> [String] {
        while let line = readLine() {
            if line.hasPrefix(prefix) { return line.split(separator: " ").dropFirst().map(String.init) }
        }
        process.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        throw WorkerFailed(description: "worker \(process.arguments?.joined(separator: " ") ?? "") exited \(process.terminationStatus) before \"\(prefix)\": \(message.suffix(800))")
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func finish() throws {
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw WorkerFailed(description: "worker exited \(process.terminationStatus): \(message.suffix(800))")
        }
    }
}

struct WorkerFailed: Error, CustomStringConvertible {
    var description: String
}
