import BenchSupport
import ContentStore
import Foundation
import StateLens

/// 64 fields of the kinds settings have (the ordo-one suite's `Settings64`).
struct Settings64: Codable, Sendable, Equatable {
    var flag0 = false, flag1 = false, flag2 = false, flag3 = false, flag4 = false, flag5 = false, flag6 = false, flag7 = false
    var flag8 = false, flag9 = false, flag10 = false, flag11 = false, flag12 = false, flag13 = false, flag14 = false, flag15 = false
    var number0 = 0, number1 = 1, number2 = 2, number3 = 3, number4 = 4, number5 = 5, number6 = 6, number7 = 7
    var number8 = 8, number9 = 9, number10 = 10, number11 = 11, number12 = 12, number13 = 13, number14 = 14, number15 = 15
    var ratio0 = 0.5, ratio1 = 1.5, ratio2 = 2.5, ratio3 = 3.5, ratio4 = 4.5, ratio5 = 5.5, ratio6 = 6.5, ratio7 = 7.5
    var ratio8 = 8.5, ratio9 = 9.5, ratio10 = 10.5, ratio11 = 11.5, ratio12 = 12.5, ratio13 = 13.5, ratio14 = 14.5, ratio15 = 15.5
    var name0 = "name 0", name1 = "name 1", name2 = "name 2", name3 = "name 3", name4 = "name 4", name5 = "name 5"
    var name6 = "name 6", name7 = "name 7", name8 = "name 8", name9 = "name 9", name10 = "name 10", name11 = "name 11"
    var name12 = "name 12", name13 = "name 13", name14 = "name 14", name15 = "name 15"
}

struct Entry: Codable, Sendable, Equatable {
    var id: Int
    var title: String
    var text: String
}

/// About 1 MB of canonical JSON: 1,000 entries of ~1 KiB.
struct LargeState: Codable, Sendable, Equatable {
    var counter = 0
    var entries: [Entry] = (0 ..< 1000).map { Entry(id: $0, title: "entry \($0)", text: String(repeating: "text of entry \($0) ", count: 50)) }
}

/// The reference commit, StateLens's update and read, and the whole-file rewrite.
final class LensContenders {
    private let fixture: StoreFixture
    private let settings: LensStore<Settings64>
    private let large: LensStore<LargeState>
    private let filePath: String
    private var counter = 0

    init() throws {
        fixture = try StoreFixture("facadespeed-lens")
        settings = try LensStore(store: fixture.store, name: "settings", default: Settings64())
        try settings.root.set(Settings64(number0: 42))
        large = try LensStore(store: fixture.store, name: "large", default: LargeState())
        try large.root.set(LargeState(counter: 1))
        filePath = fixture.directory + "/state.json"
    }

    var contenders: [Contender] {
        [Contender(name: "1KiB") { [self] in try commitKibibyte() },
         Contender(name: "lens") { [self] in try updateOneField() },
         Contender(name: "file") { [self] in try rewriteFile() }]
    }

    private func commitKibibyte() throws -> Sample {
        counter += 1
        return try facadespeed.commitKibibyte(on: fixture.store, counter: counter)
    }

    private func updateOneField() throws -> Sample {
        counter += 1
        let (index, title) = (counter * 7919 % 1000, "updated \(counter)")
        let entries = large.root.entries
        return try measure { try entries.update { $0[index].title = title } }
    }

    private func rewriteFile() throws -> Sample {
        counter += 1
        var state = large.value
        state.entries[counter * 7919 % 1000].title = "rewritten \(counter)"
        let path = filePath
        return try measure {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let bytes = try encoder.encode(state)
            try bytes.withUnsafeBytes { try POSIX.atomicWrite(path, $0, temporarySuffix: ".tmp") }
        }
    }

    /// Nanoseconds per `value` of the 64-field state, per copy of the same struct out of a class
    /// (what any read returning a copy costs at least), and per `value` of one member lens.
    func readCost() -> (value: Sample, floor: Sample, member: Sample) {
        let count = 1_000_000
        let settings = self.settings
        let holder = Holder(settings.value)
        let number3 = settings.root.number3
        func perRead(_ body: () -> Void) -> Sample {
            let sample = measure(body)
            return Sample(wall: sample.wall * 1e3 / Double(count), cpu: sample.cpu * 1e3 / Double(count))
        }
        let value = perRead { for _ in 0 ..< count { consume(settings.value) } }
        let floor = perRead { for _ in 0 ..< count { consume(holder.settings) } }
        let member = perRead { for _ in 0 ..< count { consume(number3.value) } }
        return (value, floor, member)
    }

    func remove() { fixture.remove() }
}

/// A class holding the struct, read through a non-inlined getter as `value` is.
final class Holder: @unchecked Sendable {
    private var stored: Settings64
    init(_ settings: Settings64) { stored = settings }
    var settings: Settings64 {
        @inline(never) get { stored }
    }
}

/// Takes a value the optimizer cannot see used or unused (ordo-one's `blackHole`): the read that
/// made it cannot be dropped or hoisted out of the loop.
@_optimize(none)
func consume<T>(_ value: T) {}
