/// A first-in, first-out queue with amortized O(1) append and removal, releasing each element as
/// soon as it is removed.
struct FIFO<Element> {
    private var items: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    /// The element `popFirst()` would return, left in place.
    var first: Element? { head < items.count ? items[head] : nil }

    mutating func append(_ element: Element) {
        items.append(element)
    }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        items[head] = nil
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}
