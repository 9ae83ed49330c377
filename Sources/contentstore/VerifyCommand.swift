import ArgumentParser
import ContentStore

/// `contentstore verify`: checks the store and reports each problem; exit 2 when it finds any.
struct VerifyCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the WAL, checkpoint, packs, index and reference counts; exit 2 on damage.",
        discussion: """
            Checks WAL and checkpoint checksums, pack headers, that every indexed blob's pack file exists \
            and its entry parses and matches the index, and that every reference count equals the \
            references the records hold. --read-data also reads every blob and re-hashes it. Each problem \
            names the damaged file, offset and digest (or record key).
            """)

    @OptionGroup var options: StoreOptions

    @Flag(name: .long, help: "Also read and re-hash every blob (reads all stored data).")
    var readData = false

    func run() throws {
        let progress = ProgressBar(enabled: options.showsProgress)
        let report: VerificationReport
        do {
            report = try options.maintain(ControlRequest(command: .verify, readData: readData), progress: progress, remote: \.verify) { store in
                try store.verify(VerificationOptions(readData: readData)) { progress.update($0) }
            }
        } catch let error as StoreError where error.code == .corrupted {
            // Damage that stops the store from opening is a finding of verify, not a failure to run it.
            let problem = OpenProblem(kind: "open", message: error.message, path: error.path, offset: error.offset)
            try options.emit(OpenFailure(isClean: false, problems: [problem], readData: readData)) {
                "DAMAGED: the store does not open\n  open: \(error.message)"
            }
            throw ExitCode(ExitStatus.damaged)
        }
        progress.finish()
        try options.emit(report) { Self.describe(report) }
        if !report.isClean { throw ExitCode(ExitStatus.damaged) }
    }

    static func describe(_ report: VerificationReport) -> String {
        let checked = "\(Format.count(report.blobsChecked)) blobs\(report.readData ? " (re-hashed)" : ""), "
            + "\(Format.count(report.recordsChecked)) records, \(report.walSegmentsChecked) WAL segments"
        guard !report.isClean else { return "OK: \(checked) checked, no problems" }
        var lines = ["DAMAGED: \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s") (\(checked) checked)"]
        for problem in report.problems {
            var where_: [String] = []
            if let path = problem.path { where_.append("file \(path)") }
            if let offset = problem.offset { where_.append("offset \(offset)") }
            if let digest = problem.digest { where_.append("blob \(digest)") }
            if let key = problem.key { where_.append("record \"\(key)\"") }
            lines.append("  \(problem.kind): \(problem.message)")
            if !where_.isEmpty { lines.append("    at " + where_.joined(separator: ", ")) }
        }
        return lines.joined(separator: "\n")
    }

    /// The report when the store does not open, with the members of ``VerificationReport`` it can fill.
    struct OpenFailure: Encodable {
        var isClean: Bool
        var problems: [OpenProblem]
        var readData: Bool
    }

    struct OpenProblem: Encodable {
        var kind: String
        var message: String
        var path: String?
        var offset: UInt64?
    }
}
