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
    /// Whether the read takes about a microsecond (one small value), so that the hand-off thread
    /// may be held waiting for it: then its completion is posted before the read runs.
    static var isShort: Bool { get }
}

extension CallbackRead {
    static var isShort: Bool { false }
}

/// A read and, once read, its result, with the completion-lane claim it holds, as one object to
/// hand over: made before the read, so that it can be posted to the hand-off thread while the read
/// runs, and filled in after.
final class Delivery<Read: CallbackRead>: HandedCompletion, @unchecked Sendable {
    private let read: Read
    /// Written once by the reading thread before the delivery is published or queued; read only by
    /// the thread that runs it, after (the slot's exchange, or the queue's lock, orders the two).
    private var value: Read.Value?

    init(_ read: Read, completions: LaneExecutor<Lane, ClosureJob>, claim: LaneExecutor<Lane, ClosureJob>.Claim) {
        self.read = read
        super.init(completions: completions, claim: claim)
    }

    /// Stores the read's result; before the delivery is published or queued.
    func fill(_ value: Read.Value) { self.value = value }

    override func run() {
        guard let value else { preconditionFailure("a Delivery run before its read was filled in") }
        read.deliver(value)
    }
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
    static var isShort: Bool { true }
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
    static var isShort: Bool { true }
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
