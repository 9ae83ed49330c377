#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ContentStore
import Foundation

extension StoreOptions {
    /// Runs a maintenance command on the store, or, when another process holds it open, asks that
    /// process to run it over the store's control socket (Docs/control-protocol.md) and returns the
    /// same report. Only when no process answers is the result the `locked` error (exit 3).
    /// Ctrl-C during a remote run cancels it there; the command then exits 130.
    func maintain<Report>(
        _ request: ControlRequest, progress: ProgressBar, remote: (ControlResponse) -> Report?, local: (Store) throws -> Report
    ) throws -> Report {
        let store: Store
        do {
            store = try openExistingStore()
        } catch let locked as StoreError where locked.code == .locked {
            return try runRemotely(request, progress: progress, remote: remote, locked: locked)
        }
        defer { try? store.close() }
        let report = try local(store)
        try store.close()
        return report
    }

    private func runRemotely<Report>(
        _ request: ControlRequest, progress: ProgressBar, remote: (ControlResponse) -> Report?, locked: StoreError
    ) throws -> Report {
        var request = request
        request.progress = showsProgress
        let response: ControlResponse
        do {
            response = try Interrupt.whileCancellable { cancellation in
                try ControlClient.send(request, to: storeURL, progress: { progress.update($0) }, cancellation: cancellation)
            }
        } catch is ControlClient.Unanswered {
            throw locked
        } catch let cancelled as ControlClient.Cancelled {
            progress.finish()
            throw CommandFailure(message: cancelled.message, status: ExitStatus.interrupted)
        }
        guard let report = remote(response) else {
            throw CommandFailure(message: "the process holding \(storePath) answered \(request.command.rawValue) without a report")
        }
        return report
    }
}

/// Ctrl-C while a remote operation runs: the handler writes to a pipe the control client watches,
/// which then asks the serving process to cancel, and waits for it to say it stopped.
enum Interrupt {
    /// The pipe's write end, for the signal handler (which can capture nothing).
    nonisolated(unsafe) private static var writeEnd: Int32 = -1

    static func whileCancellable<T>(_ body: (Int32) throws -> T) throws -> T {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return try body(-1) }
        writeEnd = ends[1]
        // A parent may have started this process with SIGINT blocked; Ctrl-C must reach the handler.
        var interrupt = sigset_t()
        sigemptyset(&interrupt)
        sigaddset(&interrupt, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &interrupt, nil)
        let previous = signal(SIGINT) { _ in
            var byte: UInt8 = 1
            _ = write(Interrupt.writeEnd, &byte, 1)
        }
        defer {
            signal(SIGINT, previous)
            close(ends[0])
            close(ends[1])
        }
        return try body(ends[0])
    }
}
