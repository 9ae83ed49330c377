import Testing
import TestThreads

/// `.blocking` (Tests/TestThreads) really moves a suite's tests off the cooperative pool: were it
/// to stop doing so, every blocking suite would hold the pool again, and nothing else would notice.
@Suite(.blocking) struct BlockingTraitTests {
    @Test func aSynchronousTestRunsOnABlockingTestThread() {
        #expect(BlockingTestExecutor.shared.isCurrentThread)
    }

    /// Child tasks inherit the preference; an unstructured `Task {}` does not (SE-0417), so
    /// blocking work in one runs on the pool.
    @Test func anAsyncTestAndItsChildTasksRunThereToo() async {
        #expect(BlockingTestExecutor.shared.isCurrentThread)
        await Task.yield()
        #expect(BlockingTestExecutor.shared.isCurrentThread)
        async let child = BlockingTestExecutor.shared.isCurrentThread
        #expect(await child)
        let unstructured = await Task { BlockingTestExecutor.shared.isCurrentThread }.value
        #expect(!unstructured)
    }
}

@Suite struct UnmarkedSuiteTests {
    @Test func anUnmarkedTestRunsOnTheCooperativePool() {
        #expect(!BlockingTestExecutor.shared.isCurrentThread)
    }
}
