@testable import ContentStore

/// The embedded engine's parts, for tests that look inside a store opened on a directory.
extension Store {
    var local: LocalEngine {
        guard let local = engine as? LocalEngine else { preconditionFailure("a store on a directory has the local engine") }
        return local
    }

    var core: Core { local.core }
    var packs: PackStore { local.packs }
}
