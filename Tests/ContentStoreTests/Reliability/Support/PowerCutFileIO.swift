#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
@testable import ContentStore

/// A ``FileIO`` that forwards every call to the real file system and, beside it, models what a
/// disk would still hold after a power cut.
///
/// The model, per file (an inode, so renames and unlinks keep it): the bytes made durable by the
/// last `fsync`/`fdatasync`, and the writes and truncations since then. Per directory: the entries
/// made durable by the last `fsync` of that directory, and each create, rename and unlink since.
/// ``writeImage(to:mode:random:)`` produces the post-crash image of the tree under `root`: every
/// directory as of its last `fsync` with each later create, rename and unlink kept or lost
/// independently (a create kept while a later unlink is lost leaves both names; the reverse,
/// neither), every file as its durable bytes plus each unsynced write dropped, kept, torn at
/// 512-byte sectors, or reduced to a size change that reads back as zeros. A rename within one
/// directory is one decision: its new name appears and its old one goes together (POSIX makes
/// rename atomic, and journaling file systems keep it so across a crash).
///
/// Syncs are not forwarded (the model decides what is durable), so workloads run at memory speed.
///
/// It also injects faults: ``Fault`` fails the n-th mutating call (open, write, sync, truncate,
/// rename, unlink, mkdir) with an `errno`, without performing it. A failed sync loses the file's
/// unsynced writes from the model, as Linux marks the dirty pages clean after a writeback error:
/// a later successful sync does not make them durable ("fsyncgate").
final class PowerCutFileIO: FileIO, Sendable {
    /// The calls that faults are injected into, in the order a workload makes them.
    enum Call: String, Sendable, CaseIterable {
        case open, write, sync, truncate, rename, unlink, mkdir
    }

    struct Fault: Sendable, CustomStringConvertible {
        /// Index of the faulted call among the calls of kind `calls` on paths containing `path`, from 0.
        var index: Int
        var errno: Int32
        var calls: Set<Call> = Set(Call.allCases)
        /// Only calls on paths ending with this (for writes, syncs and truncations, the descriptor's path).
        var path: String?

        var description: String {
            let filter = calls == Set(Call.allCases) ? "call" : calls.map(\.rawValue).sorted().joined(separator: "/")
            return "\(String(cString: strerror(errno))) at \(filter) #\(index)" + (path.map { " on *\($0)" } ?? "")
        }
    }

    /// How an image treats what was not synced.
    enum ImageMode: Sendable, CaseIterable, CustomStringConvertible {
        /// Every unsynced write and directory change is lost.
        case durableOnly
        /// Every unsynced write and directory change reached the disk (a process crash).
        case everything
        /// Each unsynced write dropped, kept, torn or zero-filled, each unsynced create, rename and
        /// unlink lost or kept on its own, by the seeded generator.
        case random

        var description: String {
            switch self {
            case .durableOnly: "durable-only"
            case .everything: "everything"
            case .random: "random"
            }
        }
    }

    private enum Operation {
        case write(offset: Int, bytes: [UInt8])
        case truncate(Int)
    }

    private struct Node {
        var durable: [UInt8] = []
        var pending: [Operation] = []
    }

    private enum Entry: Equatable {
        case file(Int)
        case directory
    }

    /// A change to a directory's entries since its last `fsync`, named within that directory.
    private enum DirectoryChange {
        case link(String, Entry)
        case unlink(String)
        case rename(String, to: String)

        func apply(to entries: inout [String: Entry]) {
            switch self {
            case .link(let name, let entry): entries[name] = entry
            case .unlink(let name): entries[name] = nil
            case .rename(let source, let destination):
                // Kept while the source's create was lost: the inode still exists, under its new name only.
                if let entry = entries.removeValue(forKey: source) { entries[destination] = entry }
            }
        }
    }

    private enum Handle {
        case file(Int)
        case directory(String)
    }

    private struct State {
        var nodes: [Int: Node] = [:]
        var nextNode = 0
        /// Every path under the root as it is now.
        var current: [String: Entry] = [:]
        /// Directory path → its entries as of its last fsync.
        var durable: [String: [String: Entry]] = [:]
        /// Directory path → the changes to its entries since its last fsync, in order.
        var changes: [String: [DirectoryChange]] = [:]
        var handles: [Int32: Handle] = [:]
        var paths: [Int32: String] = [:]
        var syncs = 0
        var syncedPaths: [String] = []
        var calls = 0
        var fault: Fault?
        var faultsInjected = 0
    }

    let root: String
    private let base = SystemFileIO()
    private let state: Mutex<State>
    private let onSync: (@Sendable (_ disk: PowerCutFileIO, _ index: Int) -> Void)?

    /// Models the tree under `root` (which must exist; what it holds now counts as durable).
    /// `onSync` runs before each sync with its index from 0, while nothing of it has happened yet:
    /// the moment to take an image of a power cut at that sync.
    init(root: URL, fault: Fault? = nil, onSync: (@Sendable (PowerCutFileIO, Int) -> Void)? = nil) {
        self.root = root.standardizedFileURL.path
        self.onSync = onSync
        var initial = State()
        initial.fault = fault
        initial.durable[self.root] = [:]
        PowerCutFileIO.scan(self.root, into: &initial)
        state = Mutex(initial)
    }

    private static func scan(_ directory: String, into state: inout State) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names {
            let path = directory + "/" + name
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            if isDirectory.boolValue {
                state.current[path] = .directory
                state.durable[directory, default: [:]][name] = .directory
                state.durable[path] = [:]
                scan(path, into: &state)
            } else {
                let id = state.nextNode
                state.nextNode += 1
                state.nodes[id] = Node(durable: Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()))
                state.current[path] = .file(id)
                state.durable[directory, default: [:]][name] = .file(id)
            }
        }
    }

    /// Syncs performed (or attempted) so far.
    var syncCount: Int { state.withLock { $0.syncs } }
    /// The path of every file or directory synced so far, in order.
    var syncedPaths: [String] { state.withLock { $0.syncedPaths } }
    /// Fault-eligible calls made so far.
    var callCount: Int { state.withLock { $0.calls } }
    /// Whether the planned fault was injected.
    var faultInjected: Bool { state.withLock { $0.faultsInjected > 0 } }

    private func isTracked(_ path: String) -> Bool { path == root || path.hasPrefix(root + "/") }

    private func parent(of path: String) -> String { (path as NSString).deletingLastPathComponent }
    private func name(of path: String) -> String { (path as NSString).lastPathComponent }

    /// Counts a call and returns the error to fail it with, if it is the planned fault.
    private func fault(_ call: Call, path: String, _ state: inout State) -> SystemError? {
        guard let fault = state.fault else {
            state.calls += 1
            return nil
        }
        guard fault.calls.contains(call), fault.path.map({ path.hasSuffix($0) }) ?? true else { return nil }
        defer { state.calls += 1 }
        guard state.calls == fault.index else { return nil }
        state.faultsInjected += 1
        return SystemError(call == .sync ? "fsync" : call.rawValue, errno: fault.errno)
    }

    private func countCall(_ call: Call, path: String) -> SystemError? {
        state.withLock { fault(call, path: path, &$0) }
    }

    private func countCall(_ call: Call, descriptor: Int32) -> SystemError? {
        state.withLock { fault(call, path: $0.paths[descriptor] ?? "", &$0) }
    }

    // MARK: FileIO

    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError> {
        if let error = countCall(.open, path: path) { return .failure(error) }
        let result = base.open(path, flags: flags, mode: mode)
        guard case .success(let descriptor) = result else { return result }
        state.withLock { $0.paths[descriptor] = path }
        guard isTracked(path) else { return result }
        state.withLock { state in
            if flags & O_DIRECTORY != 0 || state.current[path] == .directory {
                state.handles[descriptor] = .directory(path)
                return
            }
            let id: Int
            if case .file(let existing) = state.current[path] {
                id = existing
                if flags & O_TRUNC != 0 { state.nodes[id]!.pending.append(.truncate(0)) }
            } else {
                id = state.nextNode
                state.nextNode += 1
                state.nodes[id] = Node()
                state.current[path] = .file(id)
                state.changes[parent(of: path), default: []].append(.link(name(of: path), .file(id)))
            }
            state.handles[descriptor] = .file(id)
        }
        return result
    }

    func close(_ descriptor: Int32) {
        state.withLock { state in
            state.handles[descriptor] = nil
            state.paths[descriptor] = nil
        }
        base.close(descriptor)
    }

    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        base.pread(descriptor, into: buffer, at: offset)
    }

    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        if let error = countCall(.write, descriptor: descriptor) { return .failure(error) }
        let result = base.pwrite(descriptor, from: buffer, at: offset)
        if case .success(let written) = result {
            state.withLock { state in
                if case .file(let id) = state.handles[descriptor] {
                    state.nodes[id]!.pending.append(.write(offset: Int(offset), bytes: Array(buffer.prefix(written))))
                }
            }
        }
        return result
    }

    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError> { synchronize(descriptor) }
    func fsync(_ descriptor: Int32) -> Result<Void, SystemError> { synchronize(descriptor) }

    private func synchronize(_ descriptor: Int32) -> Result<Void, SystemError> {
        let index = state.withLock { state in
            defer { state.syncs += 1 }
            return state.syncs
        }
        onSync?(self, index)
        return state.withLock { state -> Result<Void, SystemError> in
            state.syncedPaths.append(state.paths[descriptor] ?? "")
            let failure = fault(.sync, path: state.paths[descriptor] ?? "", &state)
            switch state.handles[descriptor] {
            case .file(let id):
                if failure != nil {
                    // The kernel drops the dirty pages' error state: these writes never become durable.
                    state.nodes[id]!.pending = []
                } else {
                    var node = state.nodes[id]!
                    for operation in node.pending { PowerCutFileIO.apply(operation, to: &node.durable) }
                    node.pending = []
                    state.nodes[id] = node
                }
            case .directory(let path):
                if failure == nil {
                    state.durable[path] = children(of: path, in: state.current)
                    state.changes[path] = nil
                }
            case nil:
                break
            }
            return failure.map { .failure($0) } ?? .success(())
        }
    }

    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError> {
        if let error = countCall(.truncate, descriptor: descriptor) { return .failure(error) }
        let result = base.ftruncate(descriptor, length: length)
        if case .success = result {
            state.withLock { state in
                if case .file(let id) = state.handles[descriptor] { state.nodes[id]!.pending.append(.truncate(Int(length))) }
            }
        }
        return result
    }

    func size(_ descriptor: Int32) -> Result<UInt64, SystemError> { base.size(descriptor) }

    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError> { base.lockExclusively(descriptor) }

    func rename(_ source: String, to destination: String) -> Result<Void, SystemError> {
        if let error = countCall(.rename, path: source) { return .failure(error) }
        let result = base.rename(source, to: destination)
        if case .success = result, isTracked(source), isTracked(destination) {
            state.withLock { state in
                precondition(state.current[source] != .directory, "renaming directories is not modelled")
                precondition(parent(of: source) == parent(of: destination), "renaming across directories is not modelled")
                state.current[destination] = state.current.removeValue(forKey: source)
                state.changes[parent(of: source), default: []].append(.rename(name(of: source), to: name(of: destination)))
            }
        }
        return result
    }

    func unlink(_ path: String) -> Result<Void, SystemError> {
        if let error = countCall(.unlink, path: path) { return .failure(error) }
        let result = base.unlink(path)
        if case .success = result, isTracked(path) {
            state.withLock { state in
                state.current[path] = nil
                state.changes[parent(of: path), default: []].append(.unlink(name(of: path)))
            }
        }
        return result
    }

    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError> {
        if let error = countCall(.mkdir, path: path) { return .failure(error) }
        let result = base.mkdir(path, mode: mode)
        if case .success = result, isTracked(path) {
            state.withLock { state in
                if state.current[path] == nil {
                    state.current[path] = .directory
                    state.durable[path] = [:]
                    state.changes[parent(of: path), default: []].append(.link(name(of: path), .directory))
                }
            }
        }
        return result
    }

    func contents(ofDirectory path: String) -> Result<[String], SystemError> { base.contents(ofDirectory: path) }

    func kind(of path: String) -> FileKind { base.kind(of: path) }

    // MARK: Images

    private func children(of directory: String, in current: [String: Entry]) -> [String: Entry] {
        var result: [String: Entry] = [:]
        for (path, entry) in current where parent(of: path) == directory {
            result[(path as NSString).lastPathComponent] = entry
        }
        return result
    }

    private static func apply(_ operation: Operation, to bytes: inout [UInt8]) {
        switch operation {
        case .truncate(let length):
            if length < bytes.count { bytes.removeSubrange(length...) } else { bytes += [UInt8](repeating: 0, count: length - bytes.count) }
        case .write(let offset, let data):
            if bytes.count < offset + data.count { bytes += [UInt8](repeating: 0, count: offset + data.count - bytes.count) }
            bytes.replaceSubrange(offset ..< offset + data.count, with: data)
        }
    }

    /// Writes the tree as a power cut now would leave it (the root's contents into `destination`).
    /// Returns how many unsynced writes and directory changes the image had to decide about.
    @discardableResult
    func writeImage(to destination: URL, mode: ImageMode, random: inout SeededRandom) throws -> Int {
        // Decide under the lock, write files after.
        var decisions = 0
        let (tree, contents): ([(path: String, isDirectory: Bool, node: Int?)], [Int: [UInt8]]) = state.withLock { state in
            var tree: [(String, Bool, Int?)] = []
            var contents: [Int: [UInt8]] = [:]
            func visit(_ directory: String, relative: String) {
                var entries = state.durable[directory] ?? [:]
                let changes = state.changes[directory] ?? []
                decisions += changes.count
                switch mode {
                case .durableOnly: break
                case .everything: entries = children(of: directory, in: state.current)
                case .random:
                    for change in changes where random.next() % 2 == 0 { change.apply(to: &entries) }
                }
                for name in entries.keys.sorted() {
                    let path = directory + "/" + name
                    let relativePath = relative.isEmpty ? name : relative + "/" + name
                    switch entries[name]! {
                    case .directory:
                        tree.append((relativePath, true, nil))
                        visit(path, relative: relativePath)
                    case .file(let id):
                        tree.append((relativePath, false, id))
                        if contents[id] == nil {
                            let node = state.nodes[id]!
                            var bytes = node.durable
                            for operation in node.pending {
                                decisions += 1
                                PowerCutFileIO.decide(operation, mode: mode, random: &random, into: &bytes)
                            }
                            contents[id] = bytes
                        }
                    }
                }
            }
            visit(root, relative: "")
            return (tree, contents)
        }
        let manager = FileManager.default
        try? manager.removeItem(at: destination)
        try manager.createDirectory(at: destination, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for item in tree {
            let url = destination.appendingPathComponent(item.path)
            if item.isDirectory {
                try manager.createDirectory(at: url, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            } else {
                // Plain open/write: Foundation's file writing is atomic (a temporary file and a sync) and slow.
                let fd = Glibc.open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                defer { Glibc.close(fd) }
                let bytes = contents[item.node!]!
                let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                guard written == bytes.count else { throw POSIXError(.EIO) }
            }
        }
        return decisions
    }

    private static func decide(_ operation: Operation, mode: ImageMode, random: inout SeededRandom, into bytes: inout [UInt8]) {
        switch mode {
        case .durableOnly:
            return
        case .everything:
            apply(operation, to: &bytes)
        case .random:
            switch operation {
            case .truncate:
                if random.next() % 2 == 0 { apply(operation, to: &bytes) }
            case .write(let offset, let data):
                switch random.next() % 4 {
                case 0: return  // dropped
                case 1: apply(operation, to: &bytes)  // kept
                case 2:  // torn: each 512-byte sector of the write independently
                    var start = offset
                    while start < offset + data.count {
                        let end = min(offset + data.count, (start / 512 + 1) * 512)
                        if random.next() % 2 == 0 {
                            apply(.write(offset: start, bytes: Array(data[(start - offset) ..< (end - offset)])), to: &bytes)
                        }
                        start = end
                    }
                default:  // the size reached the disk, the data did not: reads back as zeros
                    if offset + data.count > bytes.count { apply(.truncate(offset + data.count), to: &bytes) }
                }
            }
        }
    }
}

/// The real system calls, except that syncs do nothing: for checking images quickly, where
/// durability is not what is under test.
struct UnsyncedFileIO: FileIO {
    private let base = SystemFileIO()
    func open(_ path: String, flags: Int32, mode: mode_t) -> Result<Int32, SystemError> { base.open(path, flags: flags, mode: mode) }
    func close(_ descriptor: Int32) { base.close(descriptor) }
    func pread(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        base.pread(descriptor, into: buffer, at: offset)
    }
    func pwrite(_ descriptor: Int32, from buffer: UnsafeRawBufferPointer, at offset: UInt64) -> Result<Int, SystemError> {
        base.pwrite(descriptor, from: buffer, at: offset)
    }
    func fdatasync(_ descriptor: Int32) -> Result<Void, SystemError> { .success(()) }
    func fsync(_ descriptor: Int32) -> Result<Void, SystemError> { .success(()) }
    func ftruncate(_ descriptor: Int32, length: UInt64) -> Result<Void, SystemError> { base.ftruncate(descriptor, length: length) }
    func size(_ descriptor: Int32) -> Result<UInt64, SystemError> { base.size(descriptor) }
    func lockExclusively(_ descriptor: Int32) -> Result<Bool, SystemError> { base.lockExclusively(descriptor) }
    func rename(_ source: String, to destination: String) -> Result<Void, SystemError> { base.rename(source, to: destination) }
    func unlink(_ path: String) -> Result<Void, SystemError> { base.unlink(path) }
    func mkdir(_ path: String, mode: mode_t) -> Result<Void, SystemError> { base.mkdir(path, mode: mode) }
    func contents(ofDirectory path: String) -> Result<[String], SystemError> { base.contents(ofDirectory: path) }
    func kind(of path: String) -> FileKind { base.kind(of: path) }
}
