import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// A fresh directory under the system's temporary directory, removed when the test ends.
final class TemporaryDirectory: Sendable {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("da-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock the test moves by hand (for grace periods and snapshot pins).
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

/// Opens a store in `directory`, optionally on a test clock and without fsync.
func makeStore(_ directory: TemporaryDirectory, clock: TestClock? = nil, durability: Store.Durability = .full) throws -> Store {
    var configuration = Store.Configuration()
    configuration.durability = durability
    if let clock { configuration.now = { clock.now } }
    return try Store(at: directory.store, configuration: configuration)
}

/// The original test suite's document type: a plain (non-Sendable) Codable class.
class Person: Codable {
    let name: String
    let age: Int
    init(name: String, age: Int) {
        self.name = name
        self.age = age
    }
}

/// A converter whose `toData` always fails.
struct UnencodableValue: ValueConverter {
    static func from(data: Data) -> UnencodableValue? { UnencodableValue() }
    var toData: Data? { nil }
    var value: Int { 0 }
}

func bytes(_ text: String) -> Data { Data(text.utf8) }
func text(_ data: Data?) -> String? { data.map { String(decoding: $0, as: UTF8.self) } }

// MARK: - Awaiting callbacks

func result(_ start: (@escaping DataArchiveCompletionHandler) -> Void) async -> DataArchiveResult {
    await withCheckedContinuation { continuation in start { continuation.resume(returning: $0) } }
}

extension DataArchive {
    func setAndWait(_ key: String, _ data: Data) async -> DataArchiveResult {
        await result { set(key: key, data: data, completionHandler: $0) }
    }

    func archiveAndWait(_ key: String, _ data: Data) async -> DataArchiveResult {
        await result { archiveCurrent(key: key, andSetNewData: data, completionHandler: $0) }
    }

    func deleteAndWait(_ key: String) async -> DataArchiveResult {
        await result { delete(key: key, completionHandler: $0) }
    }

    func keepAndWait(_ limit: Int, _ key: String) async -> DataArchiveResult {
        await result { keep(upTo: limit, archivesForKey: key, completionHandler: $0) }
    }

    func getAndWait(_ key: String) async -> (Data?, DataArchiveResult) {
        await withCheckedContinuation { continuation in
            get(key: key) { continuation.resume(returning: ($0, $1)) }
        }
    }

    func getAllAndWait(_ key: String) async -> ([Data], DataArchiveResult) {
        await withCheckedContinuation { continuation in
            getAll(key: key) { continuation.resume(returning: ($0, $1)) }
        }
    }

    /// `get` through `JSONValueConverter<Person>`, as (name, age).
    func getPersonAndWait(_ key: String) async -> (PersonFields?, DataArchiveResult) {
        await withCheckedContinuation { continuation in
            get(key: key, converterType: JSONValueConverter<Person>.self) { person, result in
                continuation.resume(returning: (person.map(PersonFields.init), result))
            }
        }
    }

    func getAllPeopleAndWait(_ key: String) async -> ([PersonFields], DataArchiveResult) {
        await withCheckedContinuation { continuation in
            getAll(key: key, converterType: JSONValueConverter<Person>.self) { people, result in
                continuation.resume(returning: (people.map(PersonFields.init), result))
            }
        }
    }

    func readerAndWait(_ key: String) async -> DataArchiveLazyLockingReader? {
        await withCheckedContinuation { continuation in
            lazyLockingReader(key: key) { continuation.resume(returning: $0) }
        }
    }
}

struct PersonFields: Equatable, Sendable {
    var name: String
    var age: Int
    init(_ person: Person) {
        name = person.name
        age = person.age
    }
}

extension DataArchiveLazyLockingReader {
    func nextAndWait() async -> (Data?, DataArchiveResult) {
        await withCheckedContinuation { continuation in
            getNext { continuation.resume(returning: ($0, $1)) }
        }
    }

    /// Reads until the reader reports anything but success; returns what it read and that result.
    func drain() async -> ([Data], DataArchiveResult) {
        var read: [Data] = []
        for _ in 0 ..< 10_000 {
            let (data, result) = await nextAndWait()
            guard result.isSuccess, let data else { return (read, result) }
            read.append(data)
        }
        Issue.record("the reader did not finish")
        return (read, .success)
    }
}

// MARK: - Inspecting results

/// The store error a `storeFailure` result carries, if that is what it is.
func storeError(_ result: DataArchiveResult) -> StoreError? {
    if case .storeFailure(let error) = result { return error as? StoreError }
    return nil
}

func isFileNotFound(_ result: DataArchiveResult) -> Bool {
    if case .fileNotFound = result { return true }
    return false
}

func isLockingReaderWasFinished(_ result: DataArchiveResult) -> Bool {
    if case .lockingReaderWasFinished = result { return true }
    return false
}

func isLimitNeedsToBePositiveNumber(_ result: DataArchiveResult) -> Bool {
    if case .limitNeedsToBePositiveNumber = result { return true }
    return false
}

func couldNotConvertFileURL(_ result: DataArchiveResult) -> URL? {
    if case .couldNotConvertFile(let url, _) = result { return url }
    return nil
}

/// Counts down completions from any thread; `wait()` suspends until all arrived.
final class Countdown: Sendable {
    private struct State {
        var remaining: Int
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(remaining: count)) }

    func tick() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.remaining <= 0 { return true }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }
}
