// Warehouse operations over ContentStore (issue 4): add-step with 4 KiB user data and a 256 KiB
// asset (from one thread, and from 8 threads on 8 projects at once), undo, redo, snapshot fetch,
// and duplicating a project holding 100 MiB of assets. The side-by-side comparison with the
// original's directory layout is in `compare` (workload `warehouse`).
import Benchmark
import BenchSupport
import ContentStore
import Foundation
import Warehouse

private let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident]

private final class State: @unchecked Sendable {
    var fixture: StoreFixture?
    var storage: ProjectStorage?
    var project = UUID()
    /// More projects, one per concurrent writer.
    var projects: [UUID] = []
    var counter: UInt64 = 0
    var userData = Data()
    var asset = Data()

    func setUp(_ name: String) throws {
        let fixture = try StoreFixture(name)
        self.fixture = fixture
        storage = ProjectStorage(store: fixture.store, bundleID: "benchmarks")
        project = try storage!.createProject()
        var generator = ContentGenerator(seed: 4)
        userData = Data(generator.textBlock(size: 4 << 10))
        asset = Data(generator.textBlock(size: 256 << 10))
    }

    /// Step content whose asset is new bytes each time (a real edit), so nothing dedups away.
    func nextContent() -> StepContent {
        counter &+= 1
        let tag = counter &* 0x9E37_79B9_7F4A_7C15
        asset.withUnsafeMutableBytes { $0.storeBytes(of: tag, as: UInt64.self) }
        return StepContent(userData: userData, assets: ["layer.bin": asset])
    }

    func addStep() throws {
        try addStep(to: project, content: nextContent())
    }

    func addStep(to project: UUID, content: StepContent) throws {
        let snapshot = try storage!.fetchSnapshot(ofProject: project, options: .stepIDs)
        try storage!.update(ProjectUpdateRequest.addStep(snapshot, content: content)!)
    }
}

let benchmarks: @Sendable () -> Void = {
    let add = State()
    Benchmark(
        "add step (4 KiB user data + 256 KiB asset)",
        configuration: .init(metrics: metrics, maxDuration: .seconds(3), maxIterations: 2000,
                             setup: { try add.setUp("warehouse-add") }, teardown: { add.fixture?.remove() })
    ) { benchmark in
        do { try add.addStep() } catch { benchmark.error("\(error)") }
    }

    // 8 threads, each adding one step to its own project: one iteration is 8 add-steps, whose
    // commits the store may share syncs between.
    let concurrent = State()
    Benchmark(
        "add step, 8 threads on 8 projects (8 add-steps per iteration)",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(3), maxIterations: 500,
            setup: {
                try concurrent.setUp("warehouse-add-8")
                concurrent.projects = try (0 ..< 8).map { _ in try concurrent.storage!.createProject() }
            },
            teardown: { concurrent.fixture?.remove() })
    ) { benchmark in
        let contents = concurrent.projects.map { _ in concurrent.nextContent() }
        do {
            try runThreads(concurrent.projects.count) { thread in
                try concurrent.addStep(to: concurrent.projects[thread], content: contents[thread])
            }
        } catch { benchmark.error("\(error)") }
    }

    // Undo and redo alternate over a project of 20 steps, so each is always possible.
    let undoRedo = State()
    Benchmark(
        "undo / redo (alternating)",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(3), maxIterations: 5000,
            setup: {
                try undoRedo.setUp("warehouse-undo")
                for _ in 0 ..< 20 { try undoRedo.addStep() }
            },
            teardown: { undoRedo.fixture?.remove() })
    ) { benchmark in
        do {
            let storage = undoRedo.storage!
            let snapshot = try storage.fetchSnapshot(ofProject: undoRedo.project, options: .stepIDs)
            let request = snapshot.canUndo && snapshot.stepCursor == snapshot.stepIDs?.count
                ? ProjectUpdateRequest.undo(snapshot) : ProjectUpdateRequest.redo(snapshot)
            try storage.update(request!)
        } catch { benchmark.error("\(error)") }
    }

    let fetch = State()
    Benchmark(
        "fetch snapshot (.all) of a 20-step project",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(2),
            setup: {
                try fetch.setUp("warehouse-fetch")
                for _ in 0 ..< 20 { try fetch.addStep() }
            },
            teardown: { fetch.fixture?.remove() })
    ) { benchmark in
        do { blackHole(try fetch.storage!.fetchSnapshot(ofProject: fetch.project, options: .all)) } catch { benchmark.error("\(error)") }
    }

    // Issue 4's target: ≤ 5 ms, since a duplicate references the assets instead of copying them.
    let duplicate = State()
    Benchmark(
        "duplicate a project with 100 MiB of assets",
        configuration: .init(
            metrics: metrics, maxDuration: .seconds(3), maxIterations: 200,
            setup: {
                try duplicate.setUp("warehouse-duplicate")
                var generator = ContentGenerator(seed: 9)
                let storage = duplicate.storage!
                for i in 0 ..< 100 {
                    try storage.setAsset(Data(generator.textBlock(size: 1 << 20)), named: "assets/\(i).bin", inProject: duplicate.project)
                }
            },
            teardown: { duplicate.fixture?.remove() })
    ) { benchmark in
        do { blackHole(try duplicate.storage!.duplicateProject(duplicate.project)) } catch { benchmark.error("\(error)") }
    }
}
