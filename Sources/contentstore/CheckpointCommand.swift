import ArgumentParser
import ContentStore

/// `contentstore checkpoint`: folds the WAL into a new checkpoint.
struct CheckpointCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkpoint",
        abstract: "Write a checkpoint and delete the WAL segments it replaces, so the next open replays less.")

    @OptionGroup var options: StoreOptions

    /// What `checkpoint --json` prints.
    struct Result: Codable {
        var walBytesBefore: UInt64
        var walBytesAfter: UInt64
        /// Seconds.
        var duration: Double
    }

    func run() throws {
        let store = try options.openExistingStore()
        defer { try? store.close() }
        let before = try store.statistics().walBytes
        let started = ContinuousClock.now
        try store.checkpoint()
        let elapsed = ContinuousClock.now - started
        let after = try store.statistics().walBytes
        try store.close()
        try options.emit(Result(walBytesBefore: before, walBytesAfter: after, duration: elapsed.inSeconds)) {
            "Checkpoint written in \(Format.duration(elapsed)); WAL \(Format.bytes(before)) → \(Format.bytes(after))"
        }
    }
}
