import ArgumentParser
import ContentStore
import Foundation

/// `contentstore get DIGEST [-o FILE]`: writes a blob's bytes to stdout or a file.
struct GetCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write a blob's bytes to stdout, or to a file with -o.",
        discussion: "The bytes are verified against the digest before anything is written.")

    @OptionGroup var options: StoreOptions

    @Argument(help: ArgumentHelp("The blob's SHA-256, 64 hex digits.", valueName: "digest"))
    var digest: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write to this file (atomically) instead of stdout.", valueName: "file"))
    var output: String?

    /// What `get -o FILE --json` prints.
    struct Result: Codable {
        var digest: Digest
        var file: String
        var size: Int
    }

    func validate() throws {
        guard Digest(hex: digest) != nil else { throw ValidationError("\"\(digest)\" is not a SHA-256 digest (64 hex digits)") }
        if options.json && output == nil {
            throw ValidationError("get writes raw bytes to stdout; with --json, name a file with -o")
        }
    }

    func run() throws {
        guard let digest = Digest(hex: digest) else { throw CommandFailure(message: "\"\(self.digest)\" is not a SHA-256 digest") }
        let store = try options.openExistingStore()
        defer { try? store.close() }
        if let output {
            let url = URL(fileURLWithPath: output)
            try store.export(digest, to: url)
            let size = store.info(for: digest)?.size ?? 0
            try store.close()
            try options.emit(Result(digest: digest, file: output, size: size)) { "\(digest)  \(output) (\(Format.bytes(size)))" }
        } else {
            let data = try store.get(digest)
            try store.close()
            FileHandle.standardOutput.write(data)
        }
    }
}
