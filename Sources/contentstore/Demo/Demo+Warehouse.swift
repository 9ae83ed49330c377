import ContentStore
import Foundation
import Warehouse

/// The Warehouse facade: a project of undoable steps with user data and assets, edited, undone and
/// redone, duplicated without copying its assets, sized, and its duplicate deleted.
struct WarehouseDemo: DemoSection {
    let title = "Warehouse"

    func run(in context: DemoContext) throws {
        let storage = ProjectStorage(store: context.store, bundleID: "com.example.demo")
        var random = DemoRandom(seed: context.seed ^ 0x3A3A)
        let stepCount = max(4, Int(20 * context.scale))
        let project = try storage.createProject()

        try context.step("add steps", {
            for index in 0 ..< stepCount {
                let snapshot = try storage.fetchSnapshot(ofProject: project, options: .stepIDs)
                let content = StepContent(
                    userData: Data("{\"step\":\(index),\"brush\":\"round\",\"opacity\":0.8}".utf8) + Self.bytes(4096 - 48, &random),
                    assets: ["layers/\(index).bin": Self.bytes(256 * 1024, &random)])
                guard let request = ProjectUpdateRequest.addStep(snapshot, content: content) else { break }
                try storage.update(request)
            }
        }, describe: { _, elapsed in
            ("\(stepCount) steps (4 KiB user data + a 256 KiB asset each), one commit each, \(Format.duration(elapsed)) "
                + String(format: "(%.0f steps/s)", Double(stepCount) / max(elapsed.inSeconds, 1e-9)), ["steps": Double(stepCount), "seconds": elapsed.inSeconds])
        })

        let undos = stepCount / 2
        let cursor = try context.step("undo / redo", {
            for _ in 0 ..< undos { try storage.update(try require(ProjectUpdateRequest.undo(try storage.fetchSnapshot(ofProject: project)))) }
            for _ in 0 ..< undos / 2 { try storage.update(try require(ProjectUpdateRequest.redo(try storage.fetchSnapshot(ofProject: project, options: .stepIDs)))) }
            return try storage.fetchSnapshot(ofProject: project).stepCursor
        }, describe: { cursor, elapsed in
            ("\(undos) undos and \(undos / 2) redos in \(Format.duration(elapsed)) → cursor \(cursor) of \(stepCount)",
             ["operations": Double(undos + undos / 2), "cursor": Double(cursor)])
        })

        try context.step("branch", {
            let snapshot = try storage.fetchSnapshot(ofProject: project, options: .stepIDs)
            let content = StepContent(userData: Data("{\"step\":\"branch\"}".utf8), assets: ["layers/branch.bin": Self.bytes(64 * 1024, &random)])
            try storage.update(try require(ProjectUpdateRequest.addStep(snapshot, content: content)))
            try storage.setAsset(Self.bytes(128 * 1024, &random), named: "thumbnail.png", inProject: project)
            return try storage.fetchSnapshot(ofProject: project, options: .stepIDs).stepIDs?.count ?? 0
        }, describe: { steps, _ in
            ("a step added at cursor \(cursor) drops the \(stepCount - cursor) redoable steps → \(steps) steps", ["steps": Double(steps)])
        })

        let (copy, size) = try context.step("duplicate", {
            (try storage.duplicateProject(project), try storage.sizeOfProject(project))
        }, describe: { result, elapsed in
            ("a project of \(Format.bytes(result.1)) duplicated in \(Format.duration(elapsed)): references, not copies",
             ["seconds": elapsed.inSeconds, "projectBytes": Double(result.1)])
        })

        try context.step("sizes", {
            try storage.storageSize()
        }, describe: { total, _ in
            ("two projects, \(Format.bytes(2 * size)) as listed, \(Format.bytes(total)) of distinct blobs", ["storageBytes": Double(total)])
        })
        try storage.deleteProject(copy)
    }

    static func bytes(_ count: Int, _ random: inout DemoRandom) -> Data {
        // Half noise, half repetition: about as compressible as layer data.
        var data = Data(count: count)
        for index in 0 ..< count { data[index] = index % 64 < 32 ? UInt8(truncatingIfNeeded: random.next()) : UInt8(index % 7) }
        return data
    }
}

struct DemoFailure: Error, CustomStringConvertible {
    var description: String
}

/// Unwraps a request builder's result; nil means the demo asked for something impossible.
func require<T>(_ value: T?, _ what: String = "request") throws -> T {
    guard let value else { throw DemoFailure(description: "the demo built an impossible \(what)") }
    return value
}
