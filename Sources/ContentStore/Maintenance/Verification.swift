import Foundation

/// How ``Store/verify(_:)`` runs.
public struct VerificationOptions: Sendable, Hashable {
    /// Also read every blob back and re-hash it (reads all stored data).
    public var readData: Bool = false

    /// The defaults: check structure, not every byte.
    public init() {}

    /// Options with `readData` set.
    public init(readData: Bool) { self.readData = readData }
}

/// What ``Store/verify(_:)`` found.
public struct VerificationReport: Codable, Sendable, Hashable {
    /// One finding: what is damaged and where.
    public struct Problem: Codable, Sendable, Hashable, CustomStringConvertible {
        /// The kind of damage: `wal`, `checkpoint`, `packHeader`, `missingPack`, `packEntry`,
        /// `blobData`, `manifest`, `missingBlob` or `refCount` (Docs/operations.md explains each).
        public var kind: String
        /// A human-readable explanation.
        public var message: String
        /// The damaged file, when there is one.
        public var path: String?
        /// The offset within ``path``, when known.
        public var offset: UInt64?
        /// The blob concerned, when there is one.
        public var digest: Digest?
        /// The record key concerned, when there is one.
        public var key: String?

        /// `kind: message`.
        public var description: String { "\(kind): \(message)" }
    }

    /// True when nothing is wrong.
    public var isClean: Bool { problems.isEmpty }
    /// Every finding, in the order found.
    public var problems: [Problem]
    /// Blobs whose pack entries were checked.
    public var blobsChecked: Int
    /// Records whose references were counted.
    public var recordsChecked: Int
    /// WAL segments read.
    public var walSegmentsChecked: Int
    /// Whether every blob was re-hashed.
    public var readData: Bool

    private enum CodingKeys: String, CodingKey {
        case isClean, problems, blobsChecked, recordsChecked, walSegmentsChecked, readData
    }

    package init(problems: [Problem], blobsChecked: Int, recordsChecked: Int, walSegmentsChecked: Int, readData: Bool) {
        self.problems = problems
        self.blobsChecked = blobsChecked
        self.recordsChecked = recordsChecked
        self.walSegmentsChecked = walSegmentsChecked
        self.readData = readData
    }

    /// Encodes every member, `isClean` included.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(isClean, forKey: .isClean)
        try container.encode(problems, forKey: .problems)
        try container.encode(blobsChecked, forKey: .blobsChecked)
        try container.encode(recordsChecked, forKey: .recordsChecked)
        try container.encode(walSegmentsChecked, forKey: .walSegmentsChecked)
        try container.encode(readData, forKey: .readData)
    }

    /// Decodes what ``encode(to:)`` wrote.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        problems = try container.decode([Problem].self, forKey: .problems)
        blobsChecked = try container.decode(Int.self, forKey: .blobsChecked)
        recordsChecked = try container.decode(Int.self, forKey: .recordsChecked)
        walSegmentsChecked = try container.decode(Int.self, forKey: .walSegmentsChecked)
        readData = try container.decode(Bool.self, forKey: .readData)
    }
}

extension LocalEngine {
    /// ``Store/verify(_:progress:)``. The check works on a copy of the state, which a concurrent
    /// writer pays for by copying the index once.
    func verify(_ options: VerificationOptions, progress: ((MaintenanceProgress) -> Void)?) throws -> VerificationReport {
        try checkOpen()
        return try maintenance.withLock { _ in
            var problems: [VerificationReport.Problem] = []
            progress?(MaintenanceProgress(phase: .checkingLog, completed: 0, total: 1))
            let walSegments = try verifyLog(&problems)
            verifyCheckpoint(&problems)
            progress?(MaintenanceProgress(phase: .checkingLog, completed: 1, total: 1))
            let state = try core.withLock { core in
                guard core.isOpen else { throw Store.closedError }
                return core.state
            }
            progress?(MaintenanceProgress(phase: .checkingReferences, completed: 0, total: 1))
            try verifyReferenceCounts(state, &problems)
            progress?(MaintenanceProgress(phase: .checkingReferences, completed: 1, total: 1))
            verifyPacks(holding: state.blobs, &problems)
            try verifyBlobs(state.blobs, readData: options.readData, &problems, progress: progress)
            return noteVerification(VerificationReport(
                problems: problems, blobsChecked: state.blobs.count, recordsChecked: state.records.count,
                walSegmentsChecked: walSegments, readData: options.readData))
        }
    }

    private func verifyLog(_ problems: inout [VerificationReport.Problem]) throws -> Int {
        // Synchronously under `.full`: a record written unsynced could outlive its pack bytes in a
        // power cut, leaving an index entry whose bytes are gone for a later put to dedup against.
        try commits.flushAppended()
        let current = wal.currentSegmentNumber
        let numbers = try fileSystem.contents(of: layout.wal).compactMap(WALFormat.number(fromFileName:)).sorted()
        for number in numbers {
            let path = layout.wal + "/" + WALFormat.fileName(number)
            do {
                let bytes = try fileSystem.readFile(path, maximumSize: WALSegmentReader.maximumSegmentFileSize)
                _ = try bytes.withUnsafeBytes {
                    try WALSegmentReader.read($0, path: path, expectedNumber: number, isLast: number == current,
                                              limits: configuration.limits) { _, _ in }
                }
            } catch let error as StoreError {
                problems.append(.init(kind: "wal", message: error.message, path: error.path ?? path, offset: error.offset))
            }
        }
        return numbers.count
    }

    private func verifyCheckpoint(_ problems: inout [VerificationReport.Problem]) {
        let names = (try? fileSystem.contents(of: layout.checkpoints)) ?? []
        guard let newest = names.compactMap(Checkpoint.firstSegment(fromFileName:)).max() else { return }
        let path = layout.checkpoints + "/" + Checkpoint.fileName(newest)
        do {
            _ = try Checkpoint.load(path: path, limits: configuration.limits, fileSystem: fileSystem)
        } catch let error as StoreError {
            problems.append(.init(kind: "checkpoint", message: error.message, path: error.path ?? path, offset: error.offset))
        } catch {
            problems.append(.init(kind: "checkpoint", message: "\(error)", path: path))
        }
    }

    private func verifyReferenceCounts(_ state: StoreState, _ problems: inout [VerificationReport.Problem]) throws {
        var counted = try countManifestReferences(state.blobs, &problems)
        for (key, record) in state.records {
            for digest in record.references {
                counted[digest, default: 0] += 1
                if state.blobs[digest] == nil && counted[digest] == 1 {
                    problems.append(.init(kind: "missingBlob", message: "record \"\(Store.describe(key))\" references blob \(digest), which the index lacks",
                                          digest: digest, key: key))
                }
            }
        }
        for (digest, entry) in state.blobs.entries where Int(entry.refCount) != counted[digest, default: 0] {
            problems.append(.init(kind: "refCount", message: "blob \(digest) has reference count \(entry.refCount); records and manifest nodes hold \(counted[digest, default: 0]) references",
                                  digest: digest))
        }
    }

    /// The header (magic, checksum, the id its name promises) of every pack that holds indexed
    /// blobs. A pack holding none is garbage the next collection deletes: a crash between creating
    /// a pack file and writing its header legitimately leaves an empty one.
    private func verifyPacks(holding blobs: BlobIndex, _ problems: inout [VerificationReport.Problem]) {
        for pack in packs.packIDs where blobs.liveBytesByPack[pack] != nil {
            do {
                // Its deferred bytes are written first (PackStore's invariant); that write failing is a problem too.
                guard let file = try packs.file(pack) else { continue }
                let header = try file.readExactly(PackFormat.headerSize, at: 0)
                let intact = header.withUnsafeBytes { raw in
                    raw[0 ..< 8].elementsEqual(PackFormat.headerMagic)
                        && CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0 ..< 28])) == raw.loadUnaligned(fromByteOffset: 28, as: UInt32.self).littleEndian
                        && raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self).littleEndian == pack
                }
                if !intact {
                    problems.append(.init(kind: "packHeader", message: "pack header is damaged in \(file.path)", path: file.path, offset: 0))
                }
            } catch let error as StoreError {
                problems.append(.init(kind: "packHeader", message: error.message, path: packs.path(of: pack), offset: 0))
            } catch {
                problems.append(.init(kind: "packHeader", message: "\(error)", path: packs.path(of: pack), offset: 0))
            }
        }
    }

    private func verifyBlobs(
        _ blobs: BlobIndex, readData: Bool, _ problems: inout [VerificationReport.Problem], progress: ((MaintenanceProgress) -> Void)?
    ) throws {
        // In pack and offset order, so the disk is read sequentially.
        let ordered = blobs.entries.sorted { ($0.value.location.pack, $0.value.location.offset) < ($1.value.location.pack, $1.value.location.offset) }
        var packState: [UInt32: Bool] = [:]  // pack id → present (checked once per pack)
        progress?(MaintenanceProgress(phase: .checkingBlobs, completed: 0, total: ordered.count))
        for (index, (digest, entry)) in ordered.enumerated() {
            if index % 1024 == 1023 {
                // close() waits for this; stop promptly instead of finishing a long read.
                try checkOpen()
                try CancellationToken.checkCancellation()
                progress?(MaintenanceProgress(phase: .checkingBlobs, completed: index + 1, total: ordered.count))
            }
            let location = entry.location
            let path = packs.path(of: location.pack)
            let present = try packState[location.pack] ?? {
                // An open descriptor keeps a deleted file readable: ask the directory too.
                let present = try packs.file(location.pack) != nil && fileSystem.kind(of: path) != .missing
                if !present {
                    problems.append(.init(kind: "missingPack", message: "pack \(PackFormat.fileName(location.pack)) is missing (blob \(digest) and others)",
                                          path: path, digest: digest))
                }
                packState[location.pack] = present
                return present
            }()
            guard present, let file = try packs.file(location.pack) else { continue }
            do {
                if readData && entry.isManifest {
                    try verifyManifestData(digest, blobs)
                } else if readData {
                    try verifyEntryData(digest, entry: entry, from: file)
                } else {
                    let header = try file.readExactly(PackFormat.entryHeaderSize, at: location.offset)
                    let parsed = try header.withUnsafeBytes { try PackFormat.parseEntryHeader($0) }
                    guard parsed.digest == digest, parsed.storedLength == entry.storedLength, parsed.rawLength == entry.rawLength,
                          parsed.isCompressed == entry.isCompressed, parsed.isManifest == entry.isManifest
                    else {
                        throw StoreError.corrupted("pack entry does not match the index for blob \(digest)", path: file.path, offset: location.offset)
                    }
                }
            } catch let error as StoreError {
                problems.append(.init(kind: readData ? "blobData" : "packEntry", message: error.message, path: error.path ?? file.path,
                                      offset: error.offset ?? location.offset, digest: digest))
            } catch let error as PackFormat.Malformed {
                problems.append(.init(kind: "packEntry", message: "pack entry for blob \(digest) does not parse (\(error.reason)) in \(file.path) at offset \(location.offset)",
                                      path: file.path, offset: location.offset, digest: digest))
            } catch {
                problems.append(.init(kind: "packEntry", message: "pack entry for blob \(digest) does not parse (\(error)) in \(file.path) at offset \(location.offset)",
                                      path: file.path, offset: location.offset, digest: digest))
            }
        }
        progress?(MaintenanceProgress(phase: .checkingBlobs, completed: ordered.count, total: ordered.count))
    }

    /// Reads a blob's pack entry once and checks everything it holds: the header against the index,
    /// the blob's re-hash, and the entry's CRC32C, which a re-hashing read skips (the hash covers
    /// the blob, not the stored bytes: a damaged checksum field, or stored bytes that still decode
    /// to the blob, would otherwise pass here and fail a later read with `verifiesReads` off).
    private func verifyEntryData(_ digest: Digest, entry: BlobEntry, from file: File) throws {
        let offset = entry.location.offset
        let expected = Self.expected(digest, entry)
        try PackReader.checkLengths(expected, limits: configuration.limits, path: file.path, offset: offset)
        try withUnsafeTemporaryAllocation(byteCount: PackFormat.entryHeaderSize + Int(entry.storedLength), alignment: 16) { buffer in
            try file.readExactly(into: buffer, at: offset)
            let stored = UnsafeRawBufferPointer(buffer)
            _ = try PackReader.decodeEntry(stored, expected: expected, verify: true, limits: configuration.limits,
                                           path: file.path, offset: offset) { dictionaryOffset in
                try dictionary(in: entry.location.pack, file: file, at: dictionaryOffset)
            }
            let header = UnsafeRawBufferPointer(rebasing: stored[..<PackFormat.entryHeaderSize])
            let payload = UnsafeRawBufferPointer(rebasing: stored[PackFormat.entryHeaderSize...])
            guard PackFormat.checksumMatches(header: header, payload: payload) else {
                throw StoreError.corrupted("pack entry for blob \(digest) fails its CRC32C (the blob itself still hashes to its digest)",
                                           path: file.path, offset: offset)
            }
        }
    }
}

extension VerificationReport.Problem {
    /// A finding, as another engine's verify (the cluster's) reports one.
    package static func finding(kind: String, message: String, path: String? = nil, offset: UInt64? = nil,
                                digest: Digest? = nil, key: String? = nil) -> Self {
        Self(kind: kind, message: message, path: path, offset: offset, digest: digest, key: key)
    }
}
