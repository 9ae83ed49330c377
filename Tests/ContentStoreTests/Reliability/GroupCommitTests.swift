#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import ContentStore
import TestThreads

extension Reliability {
    /// Group commit (Docs/durability.md): committers that wait for the same batch share its sync, its
    /// outcome and its publication.
    @Suite("Reliability: group commit", .blocking)
    struct GroupCommitTests {
        static let followers = 7

        /// A store on a ``PowerCutFileIO`` whose first sync after ``commitBehindAHeldSync(_:)`` starts
        /// is held: during it, `followers` threads each commit once, and the sync goes on only once all
        /// their commits are applied and logged, queued behind it. The next batch then holds them all.
        final class HeldSync: Sendable {
            let io: PowerCutFileIO
            private let gate: Gate

            final class Gate: Sendable {
                let armed = Atomic<Bool>(false)
                let store = Mutex<Store?>(nil)
                let outcomes = Mutex<[Result<Void, any Error>]>([])
                let finished = DispatchGroup()
            }

            init(disk: URL, fault: PowerCutFileIO.Fault?) {
                let gate = Gate()
                self.gate = gate
                io = PowerCutFileIO(root: disk, fault: fault) { _, _ in
                    guard gate.armed.exchange(false, ordering: .acquiringAndReleasing), let store = gate.store.withLock({ $0 }) else { return }
                    for follower in 0 ..< GroupCommitTests.followers {
                        gate.finished.enter()
                        Thread {
                            let outcome = Result { try store.write { try $0.setRecord(Record(value: Data("\(follower)".utf8)), forKey: "follower\(follower)") } }
                            gate.outcomes.withLock { $0.append(outcome) }
                            gate.finished.leave()
                        }.start()
                    }
                    let deadline = Date().addingTimeInterval(300)  // bounds only a failing run
                    while store.core.withLock({ $0.state.commitSequence }) < UInt64(1 + GroupCommitTests.followers), Date() < deadline {
                        usleep(1000)
                    }
                }
            }

            /// Commits once, holding that commit's sync as described above; returns each follower's outcome.
            func commitBehindAHeldSync(_ store: Store) throws -> [Result<Void, any Error>] {
                gate.store.withLock { $0 = store }
                gate.armed.store(true, ordering: .releasing)
                try store.write { try $0.setRecord(Record(value: Data("first".utf8)), forKey: "first") }
                gate.finished.wait()
                gate.store.withLock { $0 = nil }
                return gate.outcomes.withLock { $0 }
            }
        }

        /// A failed sync fails every commit of its batch, not only its leader's; the log stays failed
        /// (a later sync must not be trusted to cover the lost writes); a power cut leaves exactly the
        /// acknowledged commit, and the reopened store takes new commits.
        @Test func aFailedSyncFailsEveryCommitOfItsBatch() throws {
            let dir = ScratchDirectory()
            let disk = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            // Sync 0 of the segment is its header's, sync 1 the held batch's: the followers' batch fails.
            let held = HeldSync(disk: disk, fault: PowerCutFileIO.Fault(index: 2, errno: EIO, calls: [.sync], path: "/wal/0000000000000001.log"))
            let configuration = Store.Configuration()
            var seams = Store.Seams()
            seams.fileIO = held.io
            let store = try Store(at: disk.appendingPathComponent("store"), configuration: configuration, seams: seams)

            let outcomes = try held.commitBehindAHeldSync(store)
            #expect(held.io.faultInjected)
            #expect(outcomes.count == Self.followers)
            for outcome in outcomes {
                #expect(throws: StoreError.code(.io)) { try outcome.get() }
            }
            #expect(throws: StoreError.code(.io)) { try store.write { try $0.setRecord(Record(value: Data("later".utf8)), forKey: "later") } }
            #expect(try store.record(forKey: "first") == Record(value: Data("first".utf8)))
            #expect(try store.record(forKey: "follower0") == nil)  // never published
            _ = try? store.close()

            var random = SeededRandom(seed: 0)
            let image = dir.url.appendingPathComponent("image")
            try held.io.writeImage(to: image, mode: .durableOnly, random: &random)
            let reopened = try Store(at: image.appendingPathComponent("store"))
            #expect(try allRecords(reopened) == ["first": Record(value: Data("first".utf8))])
            try reopened.write { try $0.setRecord(Record(value: Data("after".utf8)), forKey: "after") }
            #expect(try reopened.record(forKey: "after") == Record(value: Data("after".utf8)))
            #expect(try reopened.verify().isClean)
            try reopened.close()
        }

        /// The followers queued behind a held sync share the next one, and each sees its commit
        /// published when its `write` returns.
        @Test func committersQueuedBehindASyncShareTheNext() throws {
            let dir = ScratchDirectory()
            let disk = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let held = HeldSync(disk: disk, fault: nil)
            let configuration = Store.Configuration()
            var seams = Store.Seams()
            seams.fileIO = held.io
            let store = try Store(at: disk.appendingPathComponent("store"), configuration: configuration, seams: seams)
            let syncsBefore = held.io.syncCount

            let outcomes = try held.commitBehindAHeldSync(store)
            #expect(outcomes.count == Self.followers)
            for outcome in outcomes { try outcome.get() }
            // The held batch's sync, then one for all the followers.
            #expect(held.io.syncCount - syncsBefore == 2)
            for follower in 0 ..< Self.followers {
                #expect(try store.record(forKey: "follower\(follower)") == Record(value: Data("\(follower)".utf8)))
            }
            try store.close()
        }

        /// 16 writers commit while one sync of the log fails: every commit of the failing batch and
        /// after it fails (whichever committer led it, gathering or not), after a power cut the store
        /// holds exactly the acknowledged commits, and after a process crash at least those and
        /// nothing never attempted.
        @Test(arguments: [3, 17, 40])
        func sixteenWritersAndAFailedSyncKeepExactlyTheAcknowledged(failingSync: Int) throws {
            let dir = ScratchDirectory()
            let disk = dir.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let io = PowerCutFileIO(root: disk, fault: PowerCutFileIO.Fault(index: failingSync, errno: EIO, calls: [.sync], path: "/wal/0000000000000001.log"))
            var seams = Store.Seams()
            seams.fileIO = io
            let store = try Store(at: disk.appendingPathComponent("store"), configuration: Store.Configuration(), seams: seams)
            let acknowledged = Mutex<[String: Record]>([:])
            let attempted = Mutex<[String: Record]>([:])
            let lateSuccesses = Mutex<[String]>([])
            let group = DispatchGroup()
            for writer in 0 ..< 16 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    var failed = false
                    // At least 30 commits each, then on until the sync has failed: 16 writers whose
                    // batches group well make fewer syncs than `failingSync` in 30 commits each.
                    for commit in 0 ..< 300 where commit < 30 || !io.faultInjected {
                        let key = "w\(writer)/\(commit)"
                        let record = Record(value: Data(key.utf8))
                        attempted.withLock { $0[key] = record }
                        do {
                            try store.write { try $0.setRecord(record, forKey: key) }
                            if failed { lateSuccesses.withLock { $0.append(key) } }
                            acknowledged.withLock { $0[key] = record }
                        } catch {
                            failed = true
                        }
                    }
                }.start()
            }
            group.wait()
            #expect(io.faultInjected)
            #expect(!acknowledged.withLock { $0.isEmpty }, "the sync failed before any commit was acknowledged: nothing was tested")
            #expect(lateSuccesses.withLock { $0 } == [], "a commit succeeded after one of the same writer failed: the log must stay failed")
            _ = try? store.close()

            var random = SeededRandom(seed: UInt64(failingSync))
            let cut = dir.url.appendingPathComponent("cut")
            try io.writeImage(to: cut, mode: .durableOnly, random: &random)
            let afterCut = try Store(at: cut.appendingPathComponent("store"))
            #expect(try allRecords(afterCut) == acknowledged.withLock { $0 })
            try afterCut.close()

            let crash = dir.url.appendingPathComponent("crash")
            try io.writeImage(to: crash, mode: .everything, random: &random)
            let afterCrash = try Store(at: crash.appendingPathComponent("store"))
            let survived = try allRecords(afterCrash)
            let attemptedRecords = attempted.withLock { $0 }
            for (key, record) in acknowledged.withLock({ $0 }) { #expect(survived[key] == record, "\(key) acknowledged, lost") }
            for (key, record) in survived { #expect(attemptedRecords[key] == record, "\(key) never attempted") }
            try afterCrash.close()
        }
    }
}

/// Many durable committers at once, with checkpoints cutting the log under them.
@Suite(.blocking) struct ConcurrentDurableCommitTests {
    /// Each writer reads its own commit as soon as `write` returns (commits are published by batch, not
    /// one by one), every acknowledged commit survives a reopen, and a checkpoint that rotates the log
    /// while leaders wait for the core lock neither deadlocks nor loses a commit.
    @Test func everyWriterSeesItsCommitAndEveryCommitSurvives() throws {
        let dir = TemporaryDirectory()
        let store = try Store(at: dir.store, configuration: .testing(durability: .full))
        let writers = 8
        let commits = 60
        let failures = Mutex<[String]>([])
        let writing = Atomic<Int>(writers)
        let group = DispatchGroup()
        for worker in 0 ... writers {
            group.enter()
            // Threads of their own: a pool would run the workers a core's worth at a time.
            Thread {
                defer { group.leave() }
                do {
                    if worker == writers {
                        repeat { try store.checkpoint() } while writing.load(ordering: .acquiring) > 0
                        return
                    }
                    defer { writing.subtract(1, ordering: .releasing) }
                    for i in 0 ..< commits {
                        let record = Record(value: Data("\(worker)/\(i)".utf8))
                        try store.write { try $0.setRecord(record, forKey: "w\(worker)/\(i % 10)") }
                        let seen = try store.record(forKey: "w\(worker)/\(i % 10)")
                        if seen != record { failures.withLock { $0.append("writer \(worker) commit \(i) read \(String(describing: seen))") } }
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker): \(error)") }
                }
            }.start()
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        var expected: [String: Record] = [:]
        for worker in 0 ..< writers {
            for i in commits - 10 ..< commits { expected["w\(worker)/\(i % 10)"] = Record(value: Data("\(worker)/\(i)".utf8)) }
        }
        #expect(try allRecords(store) == expected)
        try store.close()
        let reopened = try Store(at: dir.store, configuration: .testing())
        #expect(try allRecords(reopened) == expected)
        #expect(try reopened.verify().isClean)
    }
}
