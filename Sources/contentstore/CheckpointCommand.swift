import ArgumentParser
import ContentStore

/// `contentstore checkpoint`: folds the WAL into a new checkpoint.
struct CheckpointCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkpoint",
        abstract: "Write a checkpoint and delete the WAL segments it replaces, so the next open replays less.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let progress = ProgressBar(enabled: false)
        // What `checkpoint --json` prints, here or from the process holding the store.
        let result = try options.maintain(ControlRequest(command: .checkpoint), progress: progress, remote: \.checkpoint) { store in
            let before = try store.statistics().walBytes
            let started = ContinuousClock.now
            try store.checkpoint()
            let elapsed = ContinuousClock.now - started
            return CheckpointReport(walBytesBefore: before, walBytesAfter: try store.statistics().walBytes, duration: elapsed.inSeconds)
        }
        try options.emit(result) {
            "Checkpoint written in \(Format.duration(.milliseconds(Int64(result.duration * 1000)))); WAL \(Format.bytes(result.walBytesBefore)) → \(Format.bytes(result.walBytesAfter))"
        }
    }
}
