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

    /// A value sent by the closure that makes it is made only when a stream is there to take it,
    /// once for all of them.
    @Test func aValueMadeOnSendIsMadeOnlyForSubscribers() async {
        let broadcast = Broadcast<Int>()
        var made = 0
        broadcast.send { made += 1; return 1 }
        #expect(made == 0)
        let first = broadcast.subscribe(), second = broadcast.subscribe()
        broadcast.send { made += 1; return 2 }
        #expect(made == 1)
        broadcast.finish()
        broadcast.send { made += 1; return 3 }
        #expect(made == 1)
        #expect(await collected(first) == [2])
        #expect(await collected(second) == [2])
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

    /// A send with no stream returns before the lock (the count of streams): one leaving must not
    /// make the broadcast take the ones staying for none.
    @Test func theStreamsStayingAreReachedAfterAnotherLeaves() async {
        let broadcast = Broadcast<Int>()
        let kept = broadcast.subscribe()
        let reader = Task { for await _ in broadcast.subscribe() {} }
        reader.cancel()
        await reader.value
        broadcast.send(1)
        broadcast.send { 2 }
        broadcast.finish()
        #expect(await collected(kept) == [1, 2])
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
