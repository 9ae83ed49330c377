import ContentStore
import Foundation

/// A callback read: its store work, and the delivery of the result to the caller's handler.
///
/// Why a type and not two closures: a read that runs on the calling thread builds one closure only,
/// the box handed to the completion thread (``ArchiveEngine/read(on:_:)``); its store work and its
/// delivery are calls on a value the caller already holds, with nothing allocated for them.
protocol CallbackRead: Sendable {
    associatedtype Output: Sendable
    /// The store work, on the key's lane.
    func read(_ engine: ArchiveEngine) -> Output
    /// Calls the completion handler with `output`, on the key's completion lane.
    func deliver(_ output: Output)
}

/// A read given as closures (the reads that are rarely in a loop: converters, `getAll`).
struct ClosureRead<Output: Sendable>: CallbackRead {
    let operation: @Sendable (ArchiveEngine) -> Output
    let delivery: @Sendable (Output) -> Void

    func read(_ engine: ArchiveEngine) -> Output { operation(engine) }
    func deliver(_ output: Output) { delivery(output) }
}

/// `get(key:completionHandler:)`: the key's current value.
struct CurrentValueRead: CallbackRead {
    let key: String
    let completionHandler: @Sendable (Data?, DataArchiveResult) -> Void

    func read(_ engine: ArchiveEngine) -> Result<Data?, any Error> {
        Result { try engine.current(forKey: key) }
    }

    func deliver(_ output: Result<Data?, any Error>) {
        switch output {
        case .success(let data): completionHandler(data, .success)
        case .failure(let error): completionHandler(nil, .storeFailure(error))
        }
    }
}
