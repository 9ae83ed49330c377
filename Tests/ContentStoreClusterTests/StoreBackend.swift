import ContentStore
import ContentStoreCluster
import Foundation
import Testing

/// The backends the engine contract runs on: an embedded store in a temporary directory, and a
/// cluster store with a database and bucket of its own on the real services `make test` starts.
enum StoreBackend: String, Sendable, CustomTestStringConvertible {
    case embedded
    case cluster

    /// The cluster case needs the services; without them only the embedded case runs
    /// (and ``ClusterBackendAvailability`` says why the cluster case is missing).
    static var available: [StoreBackend] { ClusterTestEnvironment.current == nil ? [.embedded] : [.embedded, .cluster] }

    var testDescription: String { rawValue }
}

/// Where a test's store lives, so a second instance (another `Store`, another process) can open it.
struct StoreLocation: Sendable {
    var backend: StoreBackend
    var directory: URL?
    var cluster: ClusterConfiguration?

    func open(_ configuration: Store.Configuration = StoreLocation.configuration) async throws -> Store {
        if let cluster { return try await Store(cluster: cluster, configuration: configuration) }
        return try Store(at: directory!, configuration: configuration)
    }

    static var configuration: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.controlSocket = false
        return configuration
    }
}

/// Runs `body` with a fresh store on `backend` (its own directory, or its own database and bucket),
/// closes it and removes what it made.
func withStore<T>(_ backend: StoreBackend, configuration: Store.Configuration = StoreLocation.configuration,
                  _ body: (Store, StoreLocation) async throws -> T) async throws -> T {
    switch backend {
    case .embedded:
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cs-contract-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let location = StoreLocation(backend: backend, directory: directory)
        let store = try await location.open(configuration)
        defer { try? store.close() }
        return try await body(store, location)
    case .cluster:
        let environment = try ClusterTestEnvironment.required()
        let url = try await environment.makeDatabase()
        let cluster = environment.configuration(database: url)
        let location = StoreLocation(backend: backend, cluster: cluster)
        do {
            let store = try await location.open(configuration)
            let result = try await body(store, location)
            try await store.close()
            await environment.dropDatabase(url)
            return result
        } catch {
            await environment.dropDatabase(url)
            throw error
        }
    }
}

/// Says, as a skipped test, why the contract suites run only the embedded backend.
@Suite struct ClusterBackendAvailability {
    @Test(.disabled(if: ClusterTestEnvironment.current == nil, ClusterTestEnvironment.skipMessage))
    func clusterBackendIsConfigured() {
        #expect(StoreBackend.available.contains(.cluster))
    }
}

/// Retries `body` until it returns true or `timeout` passes (which bounds only a failing run).
func becomesTrue(within timeout: Duration = .seconds(300), _ body: () throws -> Bool) throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try body() { return true }
        Thread.sleep(forTimeInterval: 0.1)
    }
    return try body()
}

/// Runs blocking `work` on a thread of its own: the cooperative pool (two threads on two cores)
/// must stay free for the tasks that stop and start services meanwhile.
func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result(catching: work)) }
    }
}

/// ``withStore(_:configuration:_:)`` with a synchronous body, which then calls the blocking API.
func withStore<T>(_ backend: StoreBackend, configuration: Store.Configuration = StoreLocation.configuration,
                  _ body: (Store, StoreLocation) throws -> T) async throws -> T {
    try await withStore(backend, configuration: configuration) { (store: Store, location: StoreLocation) async throws -> T in
        try body(store, location)
    }
}
