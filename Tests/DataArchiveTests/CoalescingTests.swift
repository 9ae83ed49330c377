import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// Consecutive mutations of a key are committed together; results must be exactly those of
/// running the calls one by one.
@Suite struct CoalescingTests {
    let directory = TemporaryDirectory()

    /// Random fire-and-forget calls on a few keys, each completion checked against a model taken at
    /// call time, and the final state against the model.
    @Test func randomCallSequencesMatchSequentialModel() async throws {
        let store = try makeStore(directory, durability: .none)
        defer { try? store.close() }
        let archive = DataArchive(store: store)
        var generator = SystemRandomNumberGenerator()
        var model: [String: [String]] = [:]              // key → versions, current first
        let keys = ["a", "b", "c"]
        let calls = 3000
        let done = Countdown(calls)
        let mismatches = Mutex<[String]>([])
        @Sendable func check(_ call: Int, _ ok: Bool, _ what: @autoclosure () -> String) {
            if !ok { mismatches.withLock { $0.append("call \(call): \(what())") } }
            done.tick()
        }
        for call in 0 ..< calls {
            let key = keys.randomElement(using: &generator)!
            let value = "\(key)\(call % 17)"               // repeats, so identical versions occur
            switch Int.random(in: 0 ..< 100, using: &generator) {
            case 0 ..< 30:
                archive.archiveCurrent(key: key, andSetNewData: bytes(value)) { check(call, $0.isSuccess, "\($0)") }
                model[key, default: []].insert(value, at: 0)
            case 30 ..< 45:
                archive.set(key: key, data: bytes(value)) { check(call, $0.isSuccess, "\($0)") }
                if model[key, default: []].isEmpty { model[key] = [value] } else { model[key]![0] = value }
            case 45 ..< 52:
                archive.set(key: key, value: UnencodableValue()) { check(call, couldNotConvertFileURL($0) != nil, "\($0)") }
            case 52 ..< 62:
                let limit = Int.random(in: 0 ... 4, using: &generator)
                if limit == 0 {
                    archive.keep(upTo: limit, archivesForKey: key) { check(call, isLimitNeedsToBePositiveNumber($0), "\($0)") }
                } else {
                    archive.keep(upTo: limit, archivesForKey: key) { check(call, $0.isSuccess, "\($0)") }
                    if var versions = model[key], versions.count > limit + 1 {
                        versions.removeLast(versions.count - limit - 1)
                        model[key] = versions
                    }
                }
            case 62 ..< 67:
                archive.delete(key: key) { check(call, $0.isSuccess, "\($0)") }
                model[key] = nil
            case 67 ..< 85:
                let expected = model[key]?.first
                archive.get(key: key) { data, result in check(call, result.isSuccess && text(data) == expected, "get \(text(data) ?? "nil") != \(expected ?? "nil")") }
            default:
                let expected = model[key] ?? []
                archive.getAll(key: key) { all, _ in check(call, all.map { text($0)! } == expected, "getAll \(all.count) != \(expected.count)") }
            }
        }
        await done.wait()
        #expect(mismatches.withLock { $0 }.isEmpty, "\(mismatches.withLock { Array($0.prefix(5)) })")
        for key in keys {
            #expect(try await archive.allVersions(forKey: key).map { text($0)! } == model[key] ?? [])
        }
        #expect(archive.keys == keys.filter { model[$0] != nil })
        #expect(try await store.verify().isClean)
    }

    /// A change that fails inside a run of queued changes fails alone.
    @Test func failuresInARunAreAttributedToTheirCalls() async {
        let archive = DataArchive(rootUrl: directory.url)
        let blocker = DispatchSemaphore(value: 0)
        // Hold the lane so the next calls queue up and are taken as one batch.
        archive.set(key: "doc", value: BlockingValue(release: blocker))
        let results = Mutex<[Int: DataArchiveResult]>([:])
        let done = Countdown(4)
        archive.archiveCurrent(key: "doc", andSetNewData: bytes("v1")) { r in results.withLock { $0[1] = r }; done.tick() }
        archive.archiveCurrent(key: "doc", andSetNew: UnencodableValue()) { r in results.withLock { $0[2] = r }; done.tick() }
        archive.keep(upTo: 0, archivesForKey: "doc") { r in results.withLock { $0[3] = r }; done.tick() }
        archive.archiveCurrent(key: "doc", andSetNewData: bytes("v2")) { r in results.withLock { $0[4] = r }; done.tick() }
        blocker.signal()
        await done.wait()
        let (r1, r2, r3, r4) = results.withLock { ($0[1]!, $0[2]!, $0[3]!, $0[4]!) }
        #expect(r1.isSuccess)
        #expect(couldNotConvertFileURL(r2) != nil)
        #expect(isLimitNeedsToBePositiveNumber(r3))
        #expect(r4.isSuccess)
        #expect(await archive.getAllAndWait("doc").0.map(text) == ["v2", "v1", "released"])
    }
}
