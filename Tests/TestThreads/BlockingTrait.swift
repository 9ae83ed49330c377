import Testing

/// Runs each test of a suite (or one test) on ``BlockingTestExecutor``: for tests that block their
/// thread (synchronous tests doing I/O, sweeps, waits for other threads or processes), so that they
/// never hold the cooperative pool that async tests need.
///
/// The test body and its child tasks prefer the executor (SE-0417 task executor preference): a
/// synchronous test runs on one of its threads from start to end; an async one hops back to it
/// after each suspension. An unstructured `Task {}` does not inherit the preference and runs on the
/// pool. Tests that check what the cooperative pool does must not use the trait.
public struct BlockingTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }
        try await withTaskExecutorPreference(BlockingTestExecutor.shared) { try await function() }
    }
}

extension Trait where Self == BlockingTrait {
    /// The test or suite blocks its thread: run it on the blocking test threads, not the cooperative pool.
    public static var blocking: BlockingTrait { BlockingTrait() }
}
