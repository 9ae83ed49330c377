import Foundation
import StateLens
import Synchronization
import Testing

/// A fresh directory under the system's temporary directory, removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("sl-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A test's store in its own directory; `reopen()` closes and opens it again.
final class Fixture {
    let directory: TemporaryDirectory
    private(set) var store: Store

    init(name: String = #function) throws {
        directory = TemporaryDirectory(name)
        store = try Store(at: directory.store)
    }

    func reopen() throws {
        try store.close()
        store = try Store(at: directory.store)
    }

    deinit { try? store.close() }
}

struct Protection: Codable, Sendable, Equatable {
    var enabled: Bool
    var passcode: String?
}

struct Credentials: Codable, Sendable, Equatable {
    var email: String
    var password: String
}

/// The app state of the tests, after POSLens's README example.
struct Account: Codable, Sendable, Equatable {
    var credentials = Credentials(email: "", password: "")
    var protection: Protection?
    var counter = 0
    var fields = [Int](repeating: 0, count: 16)
    var total = 0
}

/// Collects what a stream yields on a task of its own.
final class Collector<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<Element>) {
        let started = Task { [self] in
            for await item in stream { items.withLock { $0.append(item) } }
        }
        task.withLock { $0 = started }
    }

    var elements: [Element] { items.withLock { $0 } }

    /// Waits (up to 120 s) until `count` elements arrived; returns them. The deadline is long because
    /// the collecting task runs on the cooperative pool, which the full test run can keep busy for
    /// tens of seconds (a run saw 34 of 160 changes after 10 s); a lost notification still fails.
    func wait(for count: Int) async -> [Element] {
        let deadline = ContinuousClock.now + .seconds(120)
        while elements.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return elements
    }

    func cancel() { task.withLock { $0?.cancel() } }
}

/// Runs `body(index)` on `count` threads at once and waits for all.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let errors = Mutex<[any Error]>([])
    let group = DispatchGroup()
    for index in 0 ..< count {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            do { try body(index) } catch { errors.withLock { $0.append(error) } }
        }
    }
    group.wait()
    if let error = errors.withLock({ $0.first }) { throw error }
}

/// ``onThreads(_:_:)`` for an async test: the test's task waits for the threads without holding a
/// thread of the cooperative pool (two on CI), which the streams' collecting tasks need meanwhile.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        Thread.detachNewThread {
            do {
                try onThreads(count, body)
                continuation.resume()
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}
