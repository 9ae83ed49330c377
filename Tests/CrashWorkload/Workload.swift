// The workload's parts; main.swift runs them (see there for the protocol).

#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import Foundation
import Synchronization

extension SplitMix64 {
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    mutating func bytes(_ count: Int, compressible: Bool) -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        if compressible {
            let words = Array("store blob record commit digest pack log the a of ".utf8)
            for i in 0 ..< count { bytes[i] = words[(i + below(3)) % words.count] }
        } else {
            for i in 0 ..< count { bytes[i] = UInt8(truncatingIfNeeded: next()) }
        }
        return Data(bytes)
    }
}

/// Lines to stdout, whole, unbuffered, one thread at a time.
let output = Mutex(())
func report(_ line: String) {
    output.withLock { _ in
        var bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 { if errno == EINTR { continue }; exit(4) }
            offset += n
        }
    }
}

func fail(_ message: String) -> Never {
    report("X \(message)")
    exit(2)
}

// MARK: Arguments

struct Options: Sendable {
    var directory: String
    var seed: UInt64
    var run: Int
    var threads = 3
    var durability: Store.Durability = .full
    var transactionLimit: Int?
    /// After the transactions, report `H` and wait to be killed instead of closing the store.
    var hold = false

    static func parse(_ all: [String]) -> Options? {
        var arguments = all
        func option(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
            defer { arguments.removeSubrange(index ... index + 1) }
            return arguments[index + 1]
        }
        let threads = option("--threads").flatMap { Int($0) }
        let durability = option("--durability")
        let limit = option("--transactions").flatMap { Int($0) }
        let hold = arguments.firstIndex(of: "--hold").map { arguments.remove(at: $0) } != nil
        guard arguments.count == 3, let seed = UInt64(arguments[1]), let run = Int(arguments[2]) else { return nil }
        var options = Options(directory: arguments[0], seed: seed, run: run)
        options.threads = threads ?? 3
        options.durability = durability == "none" ? .none : .full
        options.transactionLimit = limit
        options.hold = hold
        return options
    }
}

// MARK: Threads

func value(txid: String, key: String, padding: Int) -> Data {
    Data("\(txid) \(key)".utf8) + Data(repeating: UInt8(ascii: "x"), count: padding)
}

func work(thread: Int, store: Store, options: Options) {
    let run = options.run
    var random = SplitMix64(seed: options.seed &* 1_000_003 &+ UInt64(thread) &* 7919 &+ UInt64(run))
    let prefix = "t\(thread)/"
    // This thread's records as committed: its keys are its own, so this view is exact. Blobs they
    // reference have a count above zero and cannot be collected, so they are safe to reference again.
    var mine: [String: Record] = [:]
    do {
        for key in try store.keys(withPrefix: prefix) { mine[key] = try store.record(forKey: key) }
    } catch {
        fail("reading \(prefix): \(error)")
    }
    var transactions = 0
    var operation = 0
    while options.transactionLimit.map({ transactions < $0 }) ?? true {
        operation += 1
        let roll = random.below(100)
        do {
            switch roll {
            case 0 ..< 70:
                // Fresh blobs are referenced at once: well inside the grace period.
                var fresh: [(Digest, Data)] = []
                for _ in 0 ..< random.below(3) {
                    let data = random.bytes(100 + random.below(20_000), compressible: random.below(2) == 0)
                    fresh.append((try store.put(data), data))
                }
                let referenced = Array(Set(mine.values.flatMap(\.references)))
                var changes: [String: Record?] = [:]
                for _ in 0 ... random.below(4) {
                    let key = prefix + "k\(random.below(16))"
                    if random.below(5) == 0 {
                        changes[key] = .some(nil)
                    } else {
                        var references = fresh.filter { _ in random.below(3) != 0 }.map(\.0)
                        if !referenced.isEmpty && random.below(2) == 0 { references.append(referenced[random.below(referenced.count)]) }
                        changes[key] = Record(value: Data(), references: references)  // value filled in below
                    }
                }
                let txid = "\(run).\(thread).\(transactions)"
                let padding = changes.mapValues { _ in random.below(3000) }
                let applied: [String: Record?] = try store.write { tx in
                    let current = try tx.record(forKey: "counter").flatMap { Int(String(decoding: $0.value, as: UTF8.self)) } ?? 0
                    var line = "B \(txid) \(current + 1)"
                    var applied: [String: Record?] = [:]
                    for key in changes.keys.sorted() {
                        if let record = changes[key]!, let pad = padding[key] {
                            let full = Record(value: value(txid: txid, key: key, padding: pad), references: record.references)
                            try tx.setRecord(full, forKey: key)
                            applied[key] = full
                            line += " \(key)=\(pad):" + full.references.map(\.hex).joined(separator: ",")
                        } else {
                            try tx.removeRecord(forKey: key)
                            applied[key] = .some(nil)
                            line += " \(key)=-"
                        }
                    }
                    try tx.setRecord(Record(value: Data(String(current + 1).utf8)), forKey: "counter")
                    report(line)
                    return applied
                }
                report("A \(txid)")
                for (key, record) in applied { mine[key] = record }
                transactions += 1
            case 70 ..< 78:
                // Garbage: never referenced.
                try store.put(random.bytes(100 + random.below(30_000), compressible: random.below(2) == 0))
            case 78 ..< 86:
                // Every blob this thread references reads back intact.
                for digest in Set(mine.values.flatMap(\.references)).prefix(4) {
                    let data = try store.get(digest)
                    if Digest.sha256(data) != digest { fail("blob \(digest) reads back wrong") }
                }
            case 86 ..< 90:
                try store.checkpoint()
            case 90 ..< 95:
                var options = GarbageCollectionOptions()
                options.dryRun = random.below(4) == 0
                if random.below(2) == 0 { options.packRewriteThreshold = 0.3 }
                _ = try store.collectGarbage(options)
            default:
                // A snapshot sees this thread's records as committed.
                let seen = try store.read { snapshot in
                    try snapshot.keys(withPrefix: prefix).map { ($0, try snapshot.record(forKey: $0)) }
                }
                for (key, record) in seen where mine[key] != record {
                    fail("snapshot shows \(key) as \(String(describing: record)), committed was \(String(describing: mine[key]))")
                }
            }
        } catch {
            if roll < 70 { report("F \(run).\(thread).\(transactions) \(error)") }
            fail("operation \(operation) (roll \(roll)) of thread \(thread): \(error)")
        }
    }
}
