import ArgumentParser
import ContentStore
import Foundation

/// `contentstore put FILE...`: stores files as blobs and prints their digests.
struct PutCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Store files as blobs and print their digests (\"-\" reads stdin).",
        discussion: """
            Creates the store if it does not exist. A blob no record references is garbage: gc removes it \
            once the grace period has passed. --key commits a record referencing the blobs, which keeps them.
            """)

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: ArgumentHelp("Also commit a record under this key that references the blobs.", valueName: "key"))
    var key: String?

    @Argument(help: ArgumentHelp("Files to store; \"-\" for stdin.", valueName: "file"))
    var files: [String]

    /// One stored file, as `put --json` prints it.
    struct Stored: Codable {
        var file: String
        var digest: Digest
        var size: Int
    }

    /// What `put --json` prints.
    struct Result: Codable {
        var blobs: [Stored]
        /// The record committed with `--key`, if any.
        var key: String?
    }

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one file to put") }
    }

    func run() throws {
        let store = try options.openStore()
        defer { try? store.close() }
        let progress = ProgressBar(enabled: options.showsProgress && files.count > 1)
        var stored: [Stored] = []
        for (index, file) in files.enumerated() {
            progress.update("putting", completed: index, total: files.count)
            if file == "-" {
                let data = FileHandle.standardInput.readDataToEndOfFile()
                stored.append(Stored(file: file, digest: try store.put(data), size: data.count))
                continue
            }
            let size: Int
            do {
                let attributes = try FileManager.default.attributesOfItem(atPath: file)
                size = (attributes[.size] as? NSNumber)?.intValue ?? 0
            } catch {
                throw CommandFailure(message: "cannot read \(file): \(error.localizedDescription)")
            }
            stored.append(Stored(file: file, digest: try store.put(contentsOf: URL(fileURLWithPath: file)), size: size))
        }
        progress.finish()
        if let key {
            let value = Data(stored.map(\.file).joined(separator: "\n").utf8)
            try store.write { try $0.setRecord(Record(value: value, references: stored.map(\.digest)), forKey: key) }
        } else {
            Terminal.printNote("note: no record references these blobs; gc removes them after the grace period (use --key to keep them)", options: options)
        }
        // Closing makes the blobs durable even without a commit.
        try store.close()
        try options.emit(Result(blobs: stored, key: key)) {
            stored.map { "\($0.digest)  \($0.file)" }.joined(separator: "\n")
        }
    }
}
