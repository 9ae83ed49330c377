import Synchronization

/// The dictionary small whole blobs are compressed with, and the samples it is trained from.
///
/// Owns: when that dictionary is trained and from what. An open store copies the first small blobs
/// it stores compressed (whole blobs up to ``LocalEngine/smallBlobMaximumSize``, not chunks or
/// manifest nodes) until they come to ``LocalEngine/smallBlobTrainingBytes``; the put that
/// completes the sample hands them to the store's background work, which trains and decides
/// (``LocalEngine/installSmallBlobDictionary(trainedOn:time:)``), and the decision — a dictionary,
/// or none when it does not pay — holds until the store closes. Training is single-flight and off
/// the put path: puts meanwhile compress without one, as they did while sampling.
///
/// Nothing here is durable. The dictionary reaches the disk as an entry of each pack that holds a
/// blob compressed with it, written before that blob's entry in the same pack write
/// (``PackStore``), and as the seed file the next open adopts
/// (``LocalEngine/adoptSavedSmallBlobDictionary()``); so a crash can lose only the samples, and a
/// store without a seed trains anew from the small blobs it stores next
/// (Docs/on-disk-format.md#dictionaries).
final class SmallBlobDictionary: Sendable {
    private enum State {
        /// Copies of the blobs seen so far, and their bytes.
        case sampling([[UInt8]], bytes: Int)
        /// The background work is training on the samples.
        case training
        /// The dictionary (nil: none pays for this store's small blobs).
        case decided(ChunkDictionary?)
    }

    private let state = Mutex(State.sampling([], bytes: 0))

    /// The dictionary to compress small blobs with, once one was trained and pays.
    var current: ChunkDictionary? {
        state.withLock { state in
            guard case .decided(let dictionary) = state else { return nil }
            return dictionary
        }
    }

    /// Whether blobs are still being sampled (the caller then offers the ones it compressed).
    var isSampling: Bool {
        state.withLock { state in
            guard case .sampling = state else { return false }
            return true
        }
    }

    /// Keeps a copy of `blob` as a sample while sampling; returns all the samples when they reach
    /// `trainingBytes`, and the caller must then train and ``decide(_:)``.
    func offer(_ blob: UnsafeRawBufferPointer, trainingBytes: Int) -> [[UInt8]]? {
        state.withLock { state -> [[UInt8]]? in
            guard case .sampling(var samples, let bytes) = state else { return nil }
            samples.append(Array(blob))
            guard bytes + blob.count >= trainingBytes else {
                state = .sampling(samples, bytes: bytes + blob.count)
                return nil
            }
            state = .training
            return samples
        }
    }

    /// Ends the training ``offer(_:trainingBytes:)`` handed out: `dictionary` compresses small
    /// blobs from now until the store closes (nil: none does).
    func decide(_ dictionary: ChunkDictionary?) {
        state.withLock { $0 = .decided(dictionary) }
    }
}
