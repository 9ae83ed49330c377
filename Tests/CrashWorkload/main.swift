// A workload for the process-crash test (Tests/ContentStoreTests/Reliability/ProcessCrashTests.swift):
// threads putting blobs and committing multi-record transactions, with deletes, garbage
// collection, checkpoints and reads, until it is killed. It reports on stdout, one line per event,
// written before anything that depends on it:
//
//   B <txid> <counter> <change>...   a transaction's body ran; it commits as number <counter>
//   A <txid>                         the commit was acknowledged (`write` returned)
//   F <txid> <error>                 the commit failed (a bug: the workload never expects one)
//   X <message>                      the workload found the store wrong, and exits with status 2
//
// A change is `<key>=<padding>:<digest>,<digest>...` for a record set to the value
// "<txid> <key>" followed by <padding> "x" bytes, referencing those blobs; or `<key>=-` for a removal.
// Every transaction also sets the record "counter" to its <counter> (one more than the counter it
// read), so the commit order, and hence which prefix of commits a recovered store holds, can be
// told from the store alone.
//
// Usage: CrashWorkload <store directory> <seed> <run> [--threads N] [--durability full|none] [--transactions N [--hold]]
// With --transactions, each thread stops after that many transactions and the process exits 0;
// with --hold as well, it then puts a small blob, commits a record "held" referencing it, reports
// `H <digest>`, and waits, the store open, to be killed.

#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import Foundation
import Synchronization

guard let options = Options.parse(Array(CommandLine.arguments.dropFirst())) else {
    FileHandle.standardError.write(Data("usage: CrashWorkload <store> <seed> <run> [--threads N] [--durability full|none] [--transactions N [--hold]]\n".utf8))
    exit(64)
}

var configuration = Store.Configuration()
configuration.durability = options.durability
configuration.packSizeTarget = 64 * 1024
configuration.walSegmentSize = 64 * 1024
configuration.checkpointThreshold = 256 * 1024
configuration.garbageGracePeriod = .seconds(2)

/// Opens the store, waiting up to two seconds for its lock. The test opens the store itself between
/// kills; a child another test forks at that moment shares the lock's open file description until
/// it execs, so the lock can outlive the test's `close()` for an instant.
func openStore(at directory: URL, configuration: Store.Configuration) -> Store {
    let deadline = ContinuousClock.now + .seconds(2)
    while true {
        do {
            return try Store(at: directory, configuration: configuration)
        } catch let error as StoreError where error.code == .locked && ContinuousClock.now < deadline {
            usleep(10_000)
        } catch {
            fail("open: \(error)")
        }
    }
}

let opened = openStore(at: URL(fileURLWithPath: options.directory), configuration: configuration)

let group = DispatchGroup()
for thread in 0 ..< options.threads {
    DispatchQueue.global().async(group: group) { [opened, options] in work(thread: thread, store: opened, options: options) }
}
group.wait()
if options.hold {
    // Its pack bytes are deferred (a small put), the commit that references them acknowledged.
    do {
        let digest = try opened.put(Data("held \(options.run)".utf8) + Data(repeating: UInt8(ascii: "h"), count: 3000))
        try opened.write { try $0.setRecord(Record(value: Data("held".utf8), references: [digest]), forKey: "held") }
        report("H \(digest.hex)")
    } catch {
        fail("held commit: \(error)")
    }
    while true { sleep(60) }
}
do {
    try opened.close()
} catch {
    fail("close: \(error)")
}
exit(0)
