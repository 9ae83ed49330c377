import Foundation
import Testing
@testable import ContentStore

@Suite struct ScratchBufferTests {
    /// The pool hands a buffer to one user at a time: threads that each fill theirs with their own
    /// byte and check it after the others had their turn find only their byte.
    @Test func concurrentUsersNeverShareABuffer() async throws {
        let overwritten = await withTaskGroup(of: Int.self) { group in
            for thread in 0 ..< 8 {
                group.addTask {
                    var overwritten = 0
                    for round in 0 ..< 100 {
                        let count = 1 + (thread * 7_919 + round * 104_729) % (64 << 10)
                        let mark = UInt8(truncatingIfNeeded: thread)
                        ScratchBuffer.with(count: count) { buffer in
                            buffer.initializeMemory(as: UInt8.self, repeating: mark)
                            for _ in 0 ..< 3 { sched_yield() }
                            if buffer.contains(where: { $0 != mark }) { overwritten += 1 }
                        }
                    }
                    return overwritten
                }
            }
            return await group.reduce(0, +)
        }
        #expect(overwritten == 0)
    }

    /// A buffer larger than any pooled one is made on demand and has the size asked for.
    @Test(arguments: [0, 1, ScratchBuffer.minimumCapacity, 3 << 20, 17 << 20])
    func bufferHasTheRequestedSize(count: Int) {
        ScratchBuffer.with(count: count) { buffer in
            #expect(buffer.count == count)
            buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
            #expect(buffer.allSatisfy { $0 == 0xA5 })
        }
    }
}
