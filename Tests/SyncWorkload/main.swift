// The killed-client test's workload (Tests/SyncTests/SyncCrashTests.swift); not a product.
//
//   SyncWorkload <store> <server URL> <client ID> <count>
//
// Persists objects `item-0`, `item-1`, ... in container "crash" through a SyncClient that never
// syncs, printing "persisted <i>" (one write(2) per line) after each persist returned, so every
// printed object is acknowledged; then prints "done" and waits to be killed.
import ContentStore
import Foundation
import Sync

let arguments = CommandLine.arguments
guard arguments.count == 5, let count = Int(arguments[4]), let server = URL(string: arguments[2]) else {
    FileHandle.standardError.write(Data("usage: SyncWorkload <store> <server URL> <client ID> <count>\n".utf8))
    exit(64)
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let store = try Store(at: URL(fileURLWithPath: arguments[1]))
var configuration = SyncConfiguration()
configuration.syncsAutomatically = false
let client = try SyncClient(local: store, server: server, clientID: arguments[3], configuration: configuration)
for index in 0 ..< count {
    try await client.persist(SyncObject(container: "crash", id: "item-\(index)", body: Data("body \(index)".utf8),
                                        attachments: ["note": Data("attachment \(index % 7)".utf8)]))
    say("persisted \(index)")
}
say("done")
while true { try await Task.sleep(for: .seconds(60)) }
