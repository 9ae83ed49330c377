/// How far a long maintenance run (collection, verification) has come, for a progress display.
public struct MaintenanceProgress: Sendable, Hashable {
    /// What is being worked through.
    public struct Phase: Sendable, Hashable, CustomStringConvertible {
        /// A short lowercase description, such as "dropping blobs".
        public var description: String

        /// Collection, phase 1: checking unreferenced blobs and dropping expired ones.
        public static let droppingBlobs = Phase(description: "dropping blobs")
        /// Collection, phase 2: deleting dead packs and rewriting mostly dead ones.
        public static let compactingPacks = Phase(description: "compacting packs")
        /// Verification: reading the WAL and checkpoint.
        public static let checkingLog = Phase(description: "checking log")
        /// Verification: counting references.
        public static let checkingReferences = Phase(description: "checking references")
        /// Verification: checking (or, with `readData`, reading and re-hashing) every blob.
        public static let checkingBlobs = Phase(description: "checking blobs")
    }

    /// The current phase.
    public var phase: Phase
    /// Items of the phase done.
    public var completed: Int
    /// Items in the phase.
    public var total: Int

    /// Creates a progress value.
    public init(phase: Phase, completed: Int, total: Int) {
        self.phase = phase
        self.completed = completed
        self.total = total
    }
}
