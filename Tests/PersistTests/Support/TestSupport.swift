import ContentStore
import Foundation
import Synchronization
import Testing
@testable import Persist

/// A fresh directory under the system's temporary directory, removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let url: URL

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("persist-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The store directory inside it.
    var store: URL { url.appendingPathComponent("store", isDirectory: true) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let date: Mutex<Date>
    init(_ start: Date = Date(timeIntervalSinceReferenceDate: 800_000_000.123_456_789)) { date = Mutex(start) }
    var now: Date { date.withLock { $0 } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

/// A store and a persister over it, in their own temporary directory.
final class Fixture {
    let directory: TemporaryDirectory
    let clock = TestClock()
    private(set) var store: Store
    private(set) var persister: Persister

    init(name: String = #function) throws {
        directory = TemporaryDirectory(name)
        let clock = clock
        var configuration = Store.Configuration()
        configuration.now = { clock.now }
        store = try Store(at: directory.store, configuration: configuration)
        persister = try Persister(store: store)
    }

    var configuration: Store.Configuration { store.configuration }

    /// Closes the store and opens it and the persister again.
    func reopen() throws {
        let configuration = store.configuration
        try store.close()
        store = try Store(at: directory.store, configuration: configuration)
        persister = try Persister(store: store)
    }
}

// MARK: Entities

struct Item: Entity, Equatable {
    static let entityName = "Item"
    var id = UUID()
    var label: String
    var amount: Double = 0
    var date = Date(timeIntervalSinceReferenceDate: 0)
}

struct Tag: Entity, Equatable {
    static let entityName = "Tag"
    var id = UUID()
    var name: String
}

/// The same stored entity as ``Item``, under another Swift name: a renamed type.
struct RenamedItem: Entity, Equatable {
    static let entityName = "Item"
    var id: UUID
    var label: String
    var amount: Double
    var date: Date
}

/// Stored as "Item" too, but with a field Items do not have.
struct StrictItem: Entity {
    static let entityName = "Item"
    var id: UUID
    var label: String
    var mandatory: Int
}

extension UUID {
    /// A UUID whose last byte is `n`: IDs with a known order.
    static func numbered(_ n: UInt8) -> UUID {
        UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, n))
    }
}

// MARK: The in-memory model

/// The graph as plain values, with Persist's semantics written the obvious way.
struct Graph: Equatable, Sendable {
    struct Edge: Equatable, Sendable {
        var source: UUID
        var relation: String
        var target: UUID
        var cascade: Bool
    }
    var items: [UUID: Item] = [:]
    var tags: [UUID: Tag] = [:]
    /// Every relation, in relate order.
    var edges: [Edge] = []

    func exists(_ id: UUID) -> Bool { items[id] != nil || tags[id] != nil }

    mutating func relate(_ source: UUID, _ target: UUID, _ relation: String, cascade: Bool) {
        if let index = edges.firstIndex(where: { $0.source == source && $0.target == target && $0.relation == relation }) {
            edges[index].cascade = cascade
        } else {
            edges.append(Edge(source: source, relation: relation, target: target, cascade: cascade))
        }
    }

    mutating func unrelate(_ source: UUID, _ target: UUID, _ relation: String) {
        edges.removeAll { $0.source == source && $0.target == target && $0.relation == relation }
    }

    mutating func delete(_ id: UUID) {
        guard exists(id) else { return }
        items[id] = nil
        tags[id] = nil
        let cascade = edges.filter { $0.source == id && $0.cascade }.map(\.target)
        edges.removeAll { $0.source == id || $0.target == id }
        for target in cascade { delete(target) }
    }

    func targets(of source: UUID, _ relation: String) -> [UUID] {
        edges.filter { $0.source == source && $0.relation == relation }.map(\.target)
    }
}

/// A history of graph states, the way the user sees it: `states[cursor]` is current.
struct Model: Sendable {
    var states = [Graph()]
    var names: [String?] = []
    var cursor = 0

    var current: Graph { states[cursor] }

    mutating func write(_ graph: Graph, named name: String?) {
        guard graph != current else { return }
        states = Array(states[...cursor]) + [graph]
        names = Array(names[..<cursor]) + [name]
        cursor += 1
    }

    mutating func undo() -> Bool {
        guard cursor > 0 else { return false }
        cursor -= 1
        return true
    }

    mutating func redo() -> Bool {
        guard cursor < names.count else { return false }
        cursor += 1
        return true
    }

    mutating func prune(keepingLast count: Int) {
        let drop = names.count - count
        guard drop > 0 else { return }
        if drop > cursor {
            states = [current]
            names = []
            cursor = 0
        } else {
            states.removeFirst(drop)
            names.removeFirst(drop)
            cursor -= drop
        }
    }
}

/// Checks that the persister shows `graph` and, when given, the model's history.
func expectState(_ persister: Persister, _ graph: Graph, history model: Model? = nil, _ context: String,
                 sourceLocation: SourceLocation = #_sourceLocation) throws {
    try persister.read { snapshot in
        let items = try snapshot.fetchAll(Item.self)
        #expect(items == graph.items.values.sorted { $0.id.uuidString < $1.id.uuidString }, "\(context): items", sourceLocation: sourceLocation)
        let tags = try snapshot.fetchAll(Tag.self)
        #expect(tags == graph.tags.values.sorted { $0.id.uuidString < $1.id.uuidString }, "\(context): tags", sourceLocation: sourceLocation)
        for item in items {
            let children = try snapshot.related(Item.self, from: item.id, as: "child").map(\.id)
            #expect(children == graph.targets(of: item.id, "child"), "\(context): children of \(item.label)", sourceLocation: sourceLocation)
            let tagged = try snapshot.related(Tag.self, from: item.id, as: "tag").map(\.id)
            #expect(tagged == graph.targets(of: item.id, "tag"), "\(context): tags of \(item.label)", sourceLocation: sourceLocation)
        }
    }
    guard let model else { return }
    let history = try persister.history()
    #expect(history.steps.map(\.actionName) == model.names, "\(context): history", sourceLocation: sourceLocation)
    #expect(history.cursor == model.cursor, "\(context): cursor", sourceLocation: sourceLocation)
    #expect(persister.canUndo == (model.cursor > 0), "\(context): canUndo", sourceLocation: sourceLocation)
    #expect(persister.canRedo == (model.cursor < model.names.count), "\(context): canRedo", sourceLocation: sourceLocation)
}

// MARK: Random work

/// One random operation on a persister and the model, chosen from the model's state.
struct RandomWork {
    var random: SplitMix64
    var counter = 0
    /// Relations removed by the write being built: relating one again would keep its place in
    /// Persist (the net effect of the write), which the model does not mimic.
    private var unrelated: [Graph.Edge] = []

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    /// IDs from the seed, so a run can be repeated exactly (the crash test replays one).
    mutating func uuid() -> UUID {
        var bytes = (0 ..< 16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }

    private mutating func pick<T>(_ values: [T]) -> T? { values.isEmpty ? nil : values[below(values.count)] }

    /// Does one operation on both; returns what it did, for messages.
    mutating func step(_ persister: Persister, _ model: inout Model, clock: TestClock? = nil) throws -> String {
        clock?.advance(by: 0.001 + Double(below(1000)) / 7)
        switch below(60) {
        case 0 ..< 12:
            let expected = model.undo()
            let step = try persister.undo()
            #expect((step != nil) == expected, "undo")
            return "undo"
        case 12 ..< 18:
            let expected = model.redo()
            let step = try persister.redo()
            #expect((step != nil) == expected, "redo")
            return "redo"
        case 18:
            let keep = below(20)
            try persister.pruneHistory(keepingLast: keep)
            model.prune(keepingLast: keep)
            return "prune \(keep)"
        default:
            counter += 1
            let name: String? = below(4) == 0 ? nil : "action \(counter)"
            var graph = model.current
            let operations = 1 + below(3)
            var done: [String] = []
            unrelated = []
            try persister.write(name) { transaction in
                for _ in 0 ..< operations { done.append(try operation(&transaction, &graph)) }
            }
            model.write(graph, named: name)
            return "write \(done)"
        }
    }

    private mutating func operation(_ transaction: inout PersistTransaction, _ graph: inout Graph) throws -> String {
        let items = graph.items.keys.sorted { $0.uuidString < $1.uuidString }
        let tags = graph.tags.keys.sorted { $0.uuidString < $1.uuidString }
        switch below(10) {
        case 0, 1, 2:
            counter += 1
            let item = Item(id: uuid(), label: "item \(counter)", amount: Double(below(10_000)) / 3,
                            date: Date(timeIntervalSinceReferenceDate: Double(random.next() % 1_000_000_000) / 997))
            try transaction.save(item)
            graph.items[item.id] = item
            return "save new"
        case 3:
            guard var item = pick(items).flatMap({ graph.items[$0] }) else { return "none" }
            // Sometimes an unchanged save: a no-op.
            if below(3) != 0 { item.amount += 1 }
            try transaction.save(item)
            graph.items[item.id] = item
            return "update"
        case 4:
            counter += 1
            let tag = Tag(id: uuid(), name: "tag \(counter % 5)")
            try transaction.save(tag)
            graph.tags[tag.id] = tag
            return "save tag"
        case 5:
            guard let id = pick(items + tags) else { return "none" }
            if graph.items[id] != nil { try transaction.delete(Item.self, id: id) } else { try transaction.delete(Tag.self, id: id) }
            graph.delete(id)
            return "delete"
        case 6, 7:
            guard let source = pick(items), let target = pick(items),
                  !unrelated.contains(where: { $0.source == source && $0.target == target && $0.relation == "child" }) else { return "none" }
            let cascade = below(2) == 0
            try transaction.relate(source, to: target, as: "child", cascadeDelete: cascade)
            graph.relate(source, target, "child", cascade: cascade)
            return "relate child"
        case 8:
            guard let source = pick(items), let target = pick(tags),
                  !unrelated.contains(where: { $0.source == source && $0.target == target && $0.relation == "tag" }) else { return "none" }
            try transaction.relate(source, to: target, as: "tag")
            graph.relate(source, target, "tag", cascade: false)
            return "relate tag"
        default:
            guard let edge = pick(graph.edges) else { return "none" }
            try transaction.unrelate(edge.source, from: edge.target, as: edge.relation)
            unrelated.append(edge)
            graph.unrelate(edge.source, edge.target, edge.relation)
            return "unrelate"
        }
    }
}

/// Runs a long blocking test body on a thread of its own: Swift Testing runs synchronous tests on
/// the cooperative pool, and minutes of durable writes there would starve the async tests that
/// run beside them (two threads on this machine).
func onOwnThread(_ body: @escaping @Sendable () throws -> Void) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
