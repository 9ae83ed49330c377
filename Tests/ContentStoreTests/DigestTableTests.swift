import Testing

@testable import ContentStore
import TestThreads

private func digest(_ w0: UInt64, _ w1: UInt64, _ w2: UInt64, _ w3: UInt64) -> Digest {
    withUnsafeBytes(of: (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)) { Digest(bytes: $0) }
}

private func randomDigest(_ random: inout SeededRandom) -> Digest {
    digest(random.next(), random.next(), random.next(), random.next())
}

/// The key the table keeps out of its slots (it marks vacant ones).
private let zeroDigest = digest(0, 0, 0, 0)

/// 56-byte slots, as in the blob index.
private func blobEntry(_ n: Int) -> BlobEntry {
    BlobEntry(packed: UInt64(n), rawLength: UInt32(truncatingIfNeeded: n), storedLength: 1, refCount: 1, zeroSince: 0)
}

/// Full contents, count and the lazy views against the model.
private func expectSame(
    _ table: DigestTable<Int>, _ model: [Digest: Int], sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(table.count == model.count, sourceLocation: sourceLocation)
    #expect(table.isEmpty == model.isEmpty, sourceLocation: sourceLocation)
    var seen: [Digest: Int] = [:]
    for (key, value) in table {
        #expect(seen.updateValue(value, forKey: key) == nil, "\(key) yielded twice", sourceLocation: sourceLocation)
    }
    #expect(seen == model, sourceLocation: sourceLocation)
    #expect(Set(table.keys) == Set(model.keys), sourceLocation: sourceLocation)
    #expect(table.values.sorted() == model.values.sorted(), sourceLocation: sourceLocation)
}

/// Counts live instances through weak references, to catch leaked or over-released values.
private final class Tracked: Sendable {
    let n: Int
    init(_ n: Int) { self.n = n }
}

@Suite(.blocking) struct DigestTableTests {
    @Test func matchesDictionaryModel() {
        var random = SeededRandom(seed: 0xD16E57)
        var table = DigestTable<Int>(seed: 1)
        var model: [Digest: Int] = [:]
        // A pool of keys so operations revisit them: updates and removals of present keys,
        // lookups of absent ones. It includes the all-zero digest and keys sharing the hashed word.
        var pool = (0 ..< 6000).map { _ in randomDigest(&random) }
        pool.append(zeroDigest)
        let shared = random.next()
        pool += (0 ..< 40).map { _ in digest(random.next(), shared, random.next(), random.next()) }
        let neverInserted = (0 ..< 64).map { _ in randomDigest(&random) }

        for step in 0 ..< 200_000 {
            // Drift between growing and shrinking phases, so the table grows, empties and regrows.
            let removeShare: UInt64 = (step / 25_000) % 2 == 0 ? 30 : 70
            let key = pool[Int(random.next() % UInt64(pool.count))]
            let roll = random.next() % 100
            let value = Int(truncatingIfNeeded: random.next())
            if roll < removeShare / 2 {
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key), "step \(step)")
            } else if roll < removeShare {
                table[key] = nil
                model[key] = nil
            } else if roll < removeShare + (100 - removeShare) / 2 {
                #expect(table.updateValue(value, forKey: key) == model.updateValue(value, forKey: key), "step \(step)")
            } else {
                table[key] = value
                model[key] = value
            }
            let probe = pool[Int(random.next() % UInt64(pool.count))]
            #expect(table[probe] == model[probe], "step \(step)")
            #expect(table[key] == model[key], "step \(step)")
            #expect(table[neverInserted[step % neverInserted.count]] == nil, "step \(step)")
            #expect(table.count == model.count, "step \(step)")
            if step % 20_000 == 0 || step == 199_999 { expectSame(table, model) }
        }
    }

    @Test func growsThroughManySizes() {
        var random = SeededRandom(seed: 2)
        for size in [0, 1, 2, 7, 8, 9, 100, 1000, 4099, 65_537] {
            var table = DigestTable<Int>()
            var model: [Digest: Int] = [:]
            for n in 0 ..< size {
                let key = randomDigest(&random)
                table[key] = n
                model[key] = n
            }
            expectSame(table, model)
            for (key, value) in model { #expect(table[key] == value) }
            for _ in 0 ..< 100 { #expect(table[randomDigest(&random)] == nil) }
        }
    }

    @Test func reservedCapacityHoldsWithoutGrowing() {
        var random = SeededRandom(seed: 3)
        var table = DigestTable<Int>(minimumCapacity: 10_000)
        let footprint = table.memoryFootprint
        #expect(table.capacity >= 10_000)
        for n in 0 ..< 10_000 { table[randomDigest(&random)] = n }
        #expect(table.memoryFootprint == footprint)
        #expect(table.count == 10_000)
    }

    @Test func removesToEmptyAndRefills() {
        var random = SeededRandom(seed: 4)
        var table = DigestTable<Int>()
        var model: [Digest: Int] = [:]
        for round in 0 ..< 3 {
            for n in 0 ..< 30_000 {
                let key = randomDigest(&random)
                table[key] = n
                model[key] = n
            }
            table[zeroDigest] = -1
            model[zeroDigest] = -1
            expectSame(table, model)
            var keys = Array(model.keys)
            keys.shuffle(using: &random)
            for (i, key) in keys.enumerated() {
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key), "round \(round)")
                #expect(table[key] == nil)
                #expect(table.removeValue(forKey: key) == nil)
                if i % 997 == 0 {
                    // The rest survive every backward shift.
                    for other in keys[(i + 1)...].prefix(50) { #expect(table[other] == model[other]) }
                }
            }
            #expect(table.isEmpty)
            #expect(Array(table).isEmpty)
        }
    }

    @Test func copiesAreIndependent() {
        var random = SeededRandom(seed: 5)
        var original = DigestTable<Int>()
        var model: [Digest: Int] = [:]
        for n in 0 ..< 5000 {
            let key = randomDigest(&random)
            original[key] = n
            model[key] = n
        }
        let present = Array(model.keys.prefix(100))

        // Update, remove and insert (enough to grow) in a copy: the original stays as it was.
        var copy = original
        for key in present[0 ..< 50] { copy[key] = -1 }
        for key in present[50 ..< 100] { copy[key] = nil }
        // Removing an absent key must not disturb sharing either way.
        copy.removeValue(forKey: randomDigest(&random))
        for n in 0 ..< 5000 { copy[randomDigest(&random)] = n }
        expectSame(original, model)
        #expect(copy.count == 5000 - 50 + 5000)

        // And the other way round: mutating the original leaves a snapshot alone, as the
        // checkpoint's copy of the index is left alone by the live store.
        let snapshot = original
        var iterator = original.makeIterator()
        for key in present { original[key] = nil }
        original[zeroDigest] = 7
        expectSame(snapshot, model)
        var iterated = 0
        while iterator.next() != nil { iterated += 1 }
        #expect(iterated == model.count)
    }

    @Test func nonTrivialValuesAreReleasedExactlyOnce() {
        var random = SeededRandom(seed: 6)
        var watched: [Digest: Tracked] = [:]
        weak var sample: Tracked?
        do {
            var table = DigestTable<Tracked>()
            for n in 0 ..< 3000 {
                let key = randomDigest(&random)
                let value = Tracked(n)
                table[key] = value
                watched[key] = value
            }
            sample = watched.values.first
            let snapshot = table  // shares, then copies on the next write
            for key in watched.keys.prefix(1000) { table[key] = nil }
            for key in watched.keys.dropFirst(1000).prefix(1000) { table[key] = Tracked(-1) }
            #expect(snapshot.count == 3000)
            for (key, value) in snapshot { #expect(watched[key] === value) }
            #expect(table.count == 2000)
        }
        #expect(sample != nil)
        watched = [:]
        // No table holds it now, so it must be gone (a leak would keep it alive).
        #expect(sample == nil)
    }

    /// Keys an adversary could produce by brute force: sharing many bits of the hashed word,
    /// varying only in a few. The seed and mix must still spread them.
    @Test(arguments: [0, 24, 47])
    func keysSharingBitsOfTheHashedWordSpread(shift: Int) {
        var random = SeededRandom(seed: 7)
        // A fixed seed keeps the test deterministic; the keys are built without knowing it.
        var table = DigestTable<Int>(seed: 0x5EED_0007)
        let count = 100_000
        table.reserveCapacity(count)
        let base = random.next()
        var keys: [Digest] = []
        for n in 0 ..< count {
            // Only bits shift ..< shift + 17 of the word differ (bits 0...16 when shift is 0).
            let word = base ^ (UInt64(n) << UInt64(shift))
            let key = digest(base, word, base, base)
            keys.append(key)
            table[key] = n
        }
        #expect(table.count == count)
        #expect(table.maximumProbeDistance < Self.randomKeyProbeBound)
        for (n, key) in keys.enumerated() where n % 7 == 0 { #expect(table[key] == n) }
    }

    /// Keys identical in the hashed word (no adversary can make many: each costs ~2^64 hashes)
    /// all share one home slot; the table must stay correct, including when their run spills
    /// past the home range.
    @Test func keysWithTheSameHashedWordStayCorrect() {
        var random = SeededRandom(seed: 8)
        var table = DigestTable<Int>(seed: 8)
        var model: [Digest: Int] = [:]
        for group in 0 ..< 3 {
            let word = random.next()
            for n in 0 ..< 300 {
                let key = digest(random.next(), word, random.next(), random.next())
                table[key] = group * 1000 + n
                model[key] = group * 1000 + n
            }
        }
        expectSame(table, model)
        #expect(table.memoryFootprint < 2 * 56 * 900)
        for (i, key) in model.keys.enumerated() where i % 2 == 0 {
            table[key] = nil
            model[key] = nil
        }
        expectSame(table, model)
    }

    /// Longest displacement measured for random keys at the growth threshold (load 0.93), 200,000
    /// keys: 42–77 over 40 seeds (one run of the suite with a random seed saw 110); 50–71 at
    /// 0.1–2M keys. The tail is long, so the bound leaves room; pathological would be thousands.
    static let randomKeyProbeBound = 128

    @Test func randomKeysProbeShortlyAtFullLoad() {
        var random = SeededRandom(seed: 9)
        var table = DigestTable<BlobEntry>(seed: 0x5EED_0009)
        table.reserveCapacity(200_000)
        let capacity = table.capacity
        for n in 0 ..< capacity { table[randomDigest(&random)] = blobEntry(n) }
        #expect(table.count == capacity)
        #expect(table.maximumProbeDistance < Self.randomKeyProbeBound)
    }

    /// A table from ``DigestTable/largeAllocation`` on lives in a mapping of its own (a multiple of
    /// 2 MiB, on huge pages where Linux offers them, zeroed by the kernel instead of marked vacant
    /// slot by slot): it must behave exactly as a small one, through removals, a copy that diverges
    /// from it, prefetches and release.
    @Test func largeTableBehavesAsASmallOne() {
        var random = SeededRandom(seed: 44)
        let count = DigestTable<BlobEntry>.largeAllocation / 56 + 1000
        var table = DigestTable<BlobEntry>(minimumCapacity: count)
        #expect(table.memoryFootprint >= DigestTable<BlobEntry>.largeAllocation)
        #expect(table.memoryFootprint % (2 << 20) == 0, "a large table's memory is whole 2 MiB pages")
        var digests: [Digest] = []
        digests.reserveCapacity(count)
        for n in 0 ..< count {
            let key = randomDigest(&random)
            digests.append(key)
            table.prefetch(key)
            table[key] = blobEntry(n)
        }
        #expect(table.count == count)
        let copy = table
        for n in stride(from: 0, to: count, by: 2) {
            table.prefetch(digests[n])
            #expect(table.removeValue(forKey: digests[n]) == blobEntry(n))
        }
        #expect(table.count == count - (count + 1) / 2)
        var wrong = 0
        for (n, key) in digests.enumerated() {
            if table[key] != (n % 2 == 0 ? nil : blobEntry(n)) { wrong += 1 }
            if copy[key] != blobEntry(n) { wrong += 1 }
        }
        #expect(wrong == 0)
        #expect(table.reduce(0) { $0 + ($1.value.rawLength % 2 == 1 ? 1 : 0) } == table.count, "only the odd entries remain")
    }

    /// The product target: the index costs at most 64 bytes per blob at any size. Deterministic:
    /// the footprint follows from the capacity, which follows from the count.
    @Test func memoryStaysWithin64BytesPerEntry() {
        #expect(MemoryLayout<Digest>.stride + MemoryLayout<BlobEntry>.stride == 56)
        var random = SeededRandom(seed: 10)
        var table = DigestTable<BlobEntry>(seed: 0x5EED)  // fixed: the footprint depends on where overflow runs fall
        var worst = 0.0
        for n in 1 ... 300_000 {
            table[randomDigest(&random)] = blobEntry(n)
            if n >= 1000 { worst = max(worst, Double(table.memoryFootprint) / Double(n)) }
        }
        #expect(worst <= 64, "worst \(worst) bytes per entry")
        for size in [1000, 50_000, 300_000] {
            let reserved = DigestTable<BlobEntry>(minimumCapacity: size)
            #expect(Double(reserved.memoryFootprint) / Double(size) <= 64)
        }
    }
}
