import Foundation
import Testing
@testable import ContentStore

/// The fan-out behind the facades' change streams.
@Suite struct BroadcastTests {
    @Test func everyStreamGetsWhatIsSentAfterItSubscribedInOrder() async {
        let broadcast = Broadcast<Int>()
        let early = broadcast.subscribe()
        broadcast.send(1)
        let late = broadcast.subscribe()
        broadcast.send(2)
        broadcast.send(3)
        broadcast.finish()
        #expect(await collected(early) == [1, 2, 3])
        #expect(await collected(late) == [2, 3])
    }

    /// Concurrent senders: every stream sees the same single order.
    @Test func concurrentSendersReachEveryStreamInOneOrder() async {
        let broadcast = Broadcast<Int>()
        let streams = (0 ..< 3).map { _ in broadcast.subscribe() }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0 ..< 4 {
                group.addTask { for value in 0 ..< 250 { broadcast.send(sender * 1000 + value) } }
            }
        }
        broadcast.finish()
        var received: [[Int]] = []
        for stream in streams { received.append(await collected(stream)) }
        #expect(received[0].count == 1000)
        #expect(received[1] == received[0])
        #expect(received[2] == received[0])
        for sender in 0 ..< 4 {
            #expect(received[0].filter { $0 / 1000 == sender } == (0 ..< 250).map { sender * 1000 + $0 })
        }
    }

    @Test func aNewestKeptStreamSkipsWhatItsReaderFellBehindOn() async {
        let broadcast = Broadcast<Int>(bufferingPolicy: .bufferingNewest(2))
        let stream = broadcast.subscribe()
        for value in 1 ... 5 { broadcast.send(value) }
        broadcast.finish()
        #expect(await collected(stream) == [4, 5])
    }

    /// A reader that goes away leaves; the others keep receiving, and a restart takes new subscribers.
    @Test func aCancelledReaderLeavesAndFinishEndsOnlyCurrentStreams() async {
        let broadcast = Broadcast<Int>()
        let reader = Task { for await _ in broadcast.subscribe() {} }
        reader.cancel()
        await reader.value
        let kept = broadcast.subscribe()
        broadcast.send(1)
        broadcast.finish()
        let next = broadcast.subscribe()
        broadcast.send(2)
        broadcast.finish()
        #expect(await collected(kept) == [1])
        #expect(await collected(next) == [2])
    }
}

/// Everything `stream` yields until it ends.
private func collected<Element>(_ stream: AsyncStream<Element>) async -> [Element] {
    var all: [Element] = []
    for await element in stream { all.append(element) }
    return all
}
