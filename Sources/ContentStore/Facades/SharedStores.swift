import Foundation

/// The stores the facades open by directory (Warehouse's `ProjectStorage(baseURL:bundleID:)`,
/// DataArchive's `DataArchive(root:)`), shared within the process.
///
/// A store is locked against other opens (an OS file lock, per open file), so two facade objects
/// over one directory in one process must share one `Store`: the first opens it, the last to go
/// closes it. The leases are ``SharedObjects``, so a store being closed is never confused with a
/// new open of the same directory: the new open waits for the close.
package enum SharedStores {
    /// A use of a shared store; the store is closed when the last lease goes away.
    package final class Lease: Sendable {
        /// The shared store.
        package let store: Store
        private let key: SharedObjects.Key

        fileprivate init(store: Store, key: SharedObjects.Key) {
            self.store = store
            self.key = key
        }

        deinit {
            try? store.close()
            SharedObjects.release(key)
        }
    }

    /// A lease on the store in `directory`, opened (with the default configuration) by the first.
    package static func acquire(directory: URL) throws -> Lease {
        let path = directory.standardizedFileURL.resolvingSymlinksInPath().path
        let key = SharedObjects.Key(Lease.self, name: path)
        return try SharedObjects.object(for: key) {
            Lease(store: try Store(at: URL(fileURLWithPath: path, isDirectory: true)), key: key)
        }
    }
}
