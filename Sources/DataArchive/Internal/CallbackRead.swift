import ContentStore
import Foundation

/// A read through the callback API: store work on the key's operation lane, then its result handed
/// to the caller's completion handler on the key's completion lane.
///
/// A value, so that a read run promptly on the caller's thread allocates nothing for itself: its
/// ``Delivery`` (the handler and the result, without what only the read needed) is small enough to
/// travel in the hand-off slot's own cache line (``CompletionHandoff``).
protocol CallbackRead: Sendable {
    associatedtype Value: Sendable
    associatedtype Delivery: Completion
    /// The store work; runs on the operation lane (the caller's thread or a worker).
    func read(_ engine: ArchiveEngine) -> Value
    /// The call of the caller's handler with `value`, to run on the completion lane.
    func delivery(of value: Value) -> Delivery
}

/// A read given as two closures, for the reads whose own cost dwarfs their allocations (`getAll`).
struct ClosureRead<Value: Sendable>: CallbackRead {
    let body: @Sendable (ArchiveEngine) -> Value
    let handler: @Sendable (Value) -> Void

    struct Delivery: Completion {
        let handler: @Sendable (Value) -> Void
        let value: Value
        mutating func run() { handler(value) }
    }

    func read(_ engine: ArchiveEngine) -> Value { body(engine) }
    func delivery(of value: Value) -> Delivery { Delivery(handler: handler, value: value) }
}

/// `DataArchive.get(key:completionHandler:)`: the key's current value, or nil.
struct CurrentValueRead: CallbackRead {
    let key: String
    let completionHandler: @Sendable (Data?, DataArchiveResult) -> Void

    /// The handler and the result: 40 bytes, which fit in the hand-off slot's line (the key does
    /// not). The value and the error are fields, not a `Result`: matching a `Result` copies the
    /// value out, a retain and release of its storage on the hand-off thread, whose line the caller
    /// then fetches back to release the value itself.
    struct Delivery: Completion {
        let completionHandler: @Sendable (Data?, DataArchiveResult) -> Void
        let data: Data?
        let error: (any Error)?

        mutating func run() {
            if let error {
                completionHandler(nil, .storeFailure(error))
            } else {
                completionHandler(data, .success)
            }
        }
    }

    func read(_ engine: ArchiveEngine) -> Result<Data?, any Error> {
        Result { try engine.current(forKey: key) }
    }

    func delivery(of value: Result<Data?, any Error>) -> Delivery {
        switch value {
        case .success(let data): Delivery(completionHandler: completionHandler, data: data, error: nil)
        case .failure(let error): Delivery(completionHandler: completionHandler, data: nil, error: error)
        }
    }
}

/// `DataArchive.get(key:converterType:completionHandler:)`: the key's current value converted by
/// `T`, `fileNotFound` when it has none, `couldNotConvertFile` when `T` refuses it.
struct ConvertedValueRead<T: ValueConverter>: CallbackRead {
    let key: String
    let engine: ArchiveEngine
    let decode: Handover<(Data) -> T.T?>
    let completionHandler: @Sendable (T.T?, DataArchiveResult) -> Void

    func read(_ engine: ArchiveEngine) -> Result<Data?, any Error> {
        Result { try engine.current(forKey: key) }
    }

    /// The read itself (its key and converter) and the result; too large for the slot's line, so a
    /// hand-off boxes it, as converting dwarfs the allocation.
    struct Delivery: Completion {
        let read: ConvertedValueRead
        let value: Result<Data?, any Error>
        mutating func run() { read.deliver(value) }
    }

    func delivery(of value: Result<Data?, any Error>) -> Delivery { Delivery(read: self, value: value) }

    private func deliver(_ value: Result<Data?, any Error>) {
        switch value {
        case .success(nil):
            completionHandler(nil, .fileNotFound(engine.fileURL(forKey: key, index: 0)))
        case .success(let data?):
            if let converted = decode.value(data) {
                completionHandler(converted, .success)
            } else {
                completionHandler(nil, .couldNotConvertFile(engine.fileURL(forKey: key, index: 0), String(describing: T.self)))
            }
        case .failure(let error):
            completionHandler(nil, .storeFailure(error))
        }
    }
}
