import ContentStore
import Foundation

/// A read through the callback API: store work on the key's operation lane, then its result handed
/// to the caller's completion handler on the key's completion lane.
///
/// A value, so that a read run promptly on the caller's thread allocates nothing for itself: its
/// result and it travel to the completion together in one ``Delivery``, the only allocation of
/// the hand-off.
protocol CallbackRead: Sendable {
    associatedtype Value: Sendable
    /// The store work; runs on the operation lane (the caller's thread or a worker).
    func read(_ engine: ArchiveEngine) -> Value
    /// Hands `value` to the caller's handler; runs on the completion lane.
    func deliver(_ value: Value)
}

/// A read's result and the read that delivers it, with the completion-lane claim it holds, as one
/// object to hand over.
final class Delivery<Read: CallbackRead>: HandedCompletion, @unchecked Sendable {
    private let read: Read
    private let value: Read.Value

    init(_ read: Read, _ value: Read.Value, completions: LaneExecutor<Lane, ClosureJob>, claim: LaneExecutor<Lane, ClosureJob>.Claim) {
        self.read = read
        self.value = value
        super.init(completions: completions, claim: claim)
    }

    override func run() { read.deliver(value) }
}

/// A read given as two closures, for the reads whose own cost dwarfs their allocations (`getAll`).
struct ClosureRead<Value: Sendable>: CallbackRead {
    let body: @Sendable (ArchiveEngine) -> Value
    let handler: @Sendable (Value) -> Void

    func read(_ engine: ArchiveEngine) -> Value { body(engine) }
    func deliver(_ value: Value) { handler(value) }
}

/// `DataArchive.get(key:completionHandler:)`: the key's current value, or nil.
struct CurrentValueRead: CallbackRead {
    let key: String
    let completionHandler: @Sendable (Data?, DataArchiveResult) -> Void

    func read(_ engine: ArchiveEngine) -> Result<Data?, any Error> {
        Result { try engine.current(forKey: key) }
    }

    func deliver(_ value: Result<Data?, any Error>) {
        switch value {
        case .success(let data): completionHandler(data, .success)
        case .failure(let error): completionHandler(nil, .storeFailure(error))
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

    func deliver(_ value: Result<Data?, any Error>) {
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
