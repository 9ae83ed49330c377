/// Reads the records of one WAL segment and tells a torn tail from damage.
///
/// A frame that is incomplete or fails its checksum ends the readable part. Every batch the writer
/// appends starts with a sync-point frame recording how much of the segment was already durable when
/// the batch was written. If an intact sync point after the bad frame claims the bad frame's bytes
/// were durable, or the segment is not the last one, the bytes were damaged after they were synced:
/// reading stops with `corrupted`, naming the file and offset, rather than silently dropping commits.
/// Otherwise the bad frame is part of a torn, never-acknowledged write and the segment ends there.
enum WALSegmentReader {
    struct Result {
        var header: WALFormat.Header
        /// Where the intact records end; shorter than the file when a torn tail follows.
        var validLength: Int
        /// What the last intact sync point says was durable when its batch was written: the bytes
        /// from here to `validLength` were written after the last sync known to have succeeded.
        var durableClaim: Int = 0
    }

    /// Refused before reading: no legitimate segment comes near this.
    static let maximumSegmentFileSize: UInt64 = 4 << 30

    static func maximumPayload(_ limits: Store.Limits) -> Int { max(limits.maximumTransactionSize, WALFormat.maximumPackBytes) + 1024 }

    static func read(
        _ bytes: UnsafeRawBufferPointer, path: String, expectedNumber: UInt64, isLast: Bool, limits: Store.Limits,
        visit: (LogRecord, _ offset: Int) throws -> Void
    ) throws -> Result {
        guard let header = WALFormat.parseHeader(bytes) else {
            // A crash while creating the newest segment can leave its header torn; nothing was acknowledged in it.
            if isLast && !containsNonZero(bytes) || isLast && bytes.count < WALFormat.headerSize {
                return Result(header: WALFormat.Header(salt: 0, number: expectedNumber), validLength: 0)
            }
            throw StoreError.corrupted("WAL segment header is damaged", path: path, offset: 0)
        }
        guard header.number == expectedNumber else {
            throw StoreError.corrupted("WAL segment says it is number \(header.number), expected \(expectedNumber)", path: path, offset: 0)
        }
        let maximum = maximumPayload(limits)
        var offset = WALFormat.headerSize
        var lastClaim = 0
        while offset < bytes.count {
            guard let frame = WALFormat.frame(in: bytes, at: offset, salt: header.salt, maximumPayload: maximum) else {
                if isLast && durableClaim(in: bytes, after: offset, salt: header.salt, maximumPayload: maximum) <= offset {
                    return Result(header: header, validLength: offset, durableClaim: min(lastClaim, offset))
                }
                throw StoreError.corrupted("WAL record fails its checksum", path: path, offset: UInt64(offset))
            }
            if frame.kind == WALFormat.syncPointKind {
                if frame.payload.count == 8 { lastClaim = Int(clamping: frame.payload.loadUnaligned(as: UInt64.self).littleEndian) }
                offset += WALFormat.frameHeaderSize + frame.payload.count
                continue
            }
            let record: LogRecord
            do {
                record = try LogRecord.decode(kind: frame.kind, payload: frame.payload, limits: limits)
            } catch {
                throw StoreError.corrupted("WAL record does not parse (\(error))", path: path, offset: UInt64(offset))
            }
            try visit(record, offset)
            offset += WALFormat.frameHeaderSize + frame.payload.count
        }
        return Result(header: header, validLength: offset, durableClaim: min(lastClaim, offset))
    }

    /// The largest durable offset claimed by an intact sync point after `offset` (0 when none).
    ///
    /// Only sync points matter, and each is 17 bytes, so each offset costs a 17-byte check and a
    /// segment of any size is scanned in linear time. (Checking every candidate frame instead costs
    /// the length it claims, at every offset: quadratic, minutes for a damaged 64 MiB segment and
    /// hours for a hostile 1 GiB one.) A sync point cannot vouch for bytes after itself, so a claim
    /// beyond its own offset is not one.
    private static func durableClaim(in bytes: UnsafeRawBufferPointer, after offset: Int, salt: UInt32, maximumPayload: Int) -> Int {
        let syncPointSize = WALFormat.frameHeaderSize + 8
        var claim = 0
        var candidate = offset + 1
        while candidate + syncPointSize <= bytes.count {
            if bytes.loadUnaligned(fromByteOffset: candidate, as: UInt32.self).littleEndian == 8,
               bytes[candidate + 8] == WALFormat.syncPointKind,
               let frame = WALFormat.frame(in: bytes, at: candidate, salt: salt, maximumPayload: maximumPayload) {
                let claimed = Int(clamping: frame.payload.loadUnaligned(as: UInt64.self).littleEndian)
                if claimed <= candidate { claim = max(claim, claimed) }
                candidate += syncPointSize
            } else {
                candidate += 1
            }
        }
        return claim
    }

    private static func containsNonZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.contains { $0 != 0 }
    }
}
