import Foundation
import Synchronization

/// The stores the facades open by directory (Warehouse's `ProjectStorage(baseURL:bundleID:)`,
/// DataArchive's `DataArchive(root:)`), shared within the process.
///
/// A store is locked against other opens (an OS file lock, per open file), so two facade objects
/// over one directory in one process must share one `Store`: the first opens it, the last to go
/// closes it. Opening and closing happen under one lock, so a store being closed is never
/// confused with a new open of the same directory.
package enum SharedStores {
    private struct Entry {
        let store: Store
        var users: Int
    }

    private static let table = Mutex<[String: Entry]>([:])

    /// A use of a shared store; the store is closed when the last lease goes away.
    package final class Lease: Sendable {
        /// The shared store.
        package let store: Store
        private let path: String

        fileprivate init(store: Store, path: String) {
            self.store = store
            self.path = path
        }

        deinit { SharedStores.release(path) }
    }

    /// A lease on the store in `directory`, opened (with the default configuration) by the first.
    package static func acquire(directory: URL) throws -> Lease {
        let path = directory.standardizedFileURL.resolvingSymlinksInPath().path
        return try table.withLock { table in
            if var entry = table[path] {
                entry.users += 1
                table[path] = entry
                return Lease(store: entry.store, path: path)
            }
            let store = try Store(at: URL(fileURLWithPath: path, isDirectory: true))
            table[path] = Entry(store: store, users: 1)
            return Lease(store: store, path: path)
        }
    }

    private static func release(_ path: String) {
        table.withLock { table in
            guard var entry = table[path] else { return }
            entry.users -= 1
            if entry.users > 0 {
                table[path] = entry
            } else {
                table[path] = nil
                try? entry.store.close()
            }
        }
    }
}
