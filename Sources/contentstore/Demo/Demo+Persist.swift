import ContentStore
import Foundation
import Persist

/// The Persist facade: the original's budget example as an entity graph — a budget with items
/// related under "items" (cascading) — edited in undoable writes, undone and redone, reopened with
/// its history, pruned, then one item changed in a graph of many.
struct PersistDemo: DemoSection {
    let title = "Persist"

    struct Budget: Entity {
        static let entityName = "Budget"
        var id = UUID()
        var date: Date
        var amount: Double
    }

    struct BudgetItem: Entity {
        static let entityName = "BudgetItem"
        var id = UUID()
        var label: String
        var budgeted: Double
    }

    func run(in context: DemoContext) throws {
        var persister = try Persister(store: context.store, name: "demo-budget")
        let count = max(100, Int(2_000 * context.scale))
        let budget = Budget(date: Date(timeIntervalSinceReferenceDate: 608_434_859.25), amount: 3.6)
        let items = (0 ..< count).map { BudgetItem(label: "budget item \($0)", budgeted: Double($0) / 4) }

        try context.step("save graph", {
            try persister.write("Add budget") { transaction in
                try transaction.save(budget)
                for item in items {
                    try transaction.save(item)
                    try transaction.relate(budget.id, to: item.id, as: "items", cascadeDelete: true)
                }
            }
        }, describe: { _, elapsed in
            ("a budget and \(count) items related under \"items\", one durable commit in \(Format.duration(elapsed))",
             ["entities": Double(count + 1), "seconds": elapsed.inSeconds])
        })

        let edits = 50
        try context.step("edit", {
            for index in 0 ..< edits {
                var item = items[index % count]
                item.budgeted += 1
                try persister.write("Edit \(item.label)") { try $0.save(item) }
            }
        }, describe: { _, elapsed in
            ("\(edits) one-item writes, one durable commit and undo step each, \(Format.duration(elapsed / edits)) per write",
             ["writes": Double(edits), "secondsPerWrite": (elapsed / edits).inSeconds])
        })

        try context.step("delete", {
            try persister.write("Delete budget") { try $0.delete(Budget.self, id: budget.id) }
            return try persister.fetchAll(BudgetItem.self).count
        }, describe: { remaining, elapsed in
            ("deleting the budget cascades to its items (\(remaining) left) in \(Format.duration(elapsed))", ["remaining": Double(remaining)])
        })

        try context.step("undo", {
            let undone = try persister.undo()
            return (undone?.actionName ?? "nothing", try persister.related(BudgetItem.self, from: budget.id, as: "items").count)
        }, describe: { result, elapsed in
            ("undid \"\(result.0)\" in \(Format.duration(elapsed)): the budget is back with its \(result.1) items in order", [:])
        })
        guard try persister.related(BudgetItem.self, from: budget.id, as: "items").map(\.id) == items.map(\.id) else {
            throw DemoFailure(description: "undo did not bring the budget's items back in relate order")
        }

        try context.reopen()
        persister = try Persister(store: context.store, name: "demo-budget")
        try context.step("history", {
            let history = try persister.history()
            let redone = try persister.redo()
            let undone = try persister.undo()
            return (history, redone?.actionName, undone?.actionName)
        }, describe: { result, _ in
            ("after reopening: \(result.0.steps.count) steps, \(result.0.cursor) undoable; redo \"\(result.1 ?? "-")\" and undo "
                + "\"\(result.2 ?? "-")\" work across the restart", ["steps": Double(result.0.steps.count)])
        })

        let before = try context.store.statistics().blobCount
        try context.step("prune", {
            try persister.pruneHistory(keepingLast: 10)
            return try persister.history().steps.count
        }, describe: { kept, _ in
            ("pruneHistory(keepingLast: 10) → \(kept) steps; the old bodies and diffs only pruned steps held "
                + "(of \(before) blobs) are garbage for the collection below", ["keptSteps": Double(kept)])
        })
    }
}
