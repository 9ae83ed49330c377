// A second process on a cluster store, for the ContentStoreCluster tests (not a product).
//
//   ClusterWorkload increment KEY COUNT     COUNT read-modify-write increments of KEY
//   ClusterWorkload write PREFIX            forever: put a blob, commit a record referencing it, and
//                                           print "acked KEY DIGEST" after each commit returned
//   ClusterWorkload stream FILE EXPORTED    put FILE with put(contentsOf:), export it to EXPORTED; print
//                                           "DIGEST PUT-PEAK EXPORT-PEAK": how far each raised the
//                                           peak resident memory (VmHWM) above the resident memory
//                                           at its start, in bytes, after a warm-up of both paths
//
// The cluster comes from CONTENTSTORE_TEST_WORKLOAD_DATABASE_URL, CONTENTSTORE_S3_ENDPOINT,
// CONTENTSTORE_S3_BUCKET, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Exit 0 on success, 1 with
// the error on stderr otherwise.
#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import ContentStoreCluster
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

/// `body`'s result, and how far it raised VmHWM above VmRSS at its start (the peak is reset first).
func measuringPeak<T>(_ body: () throws -> T) throws -> (T, Int) {
    try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    let start = memory("VmRSS")
    let result = try body()
    return (result, memory("VmHWM") - start)
}

func memory(_ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
          let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { fail("no \(field) in /proc/self/status") }
    return kilobytes * 1024
}

let environment = ProcessInfo.processInfo.environment
guard let databaseURL = environment["CONTENTSTORE_TEST_WORKLOAD_DATABASE_URL"],
      let endpoint = environment["CONTENTSTORE_S3_ENDPOINT"].flatMap(URL.init(string:)),
      let bucket = environment["CONTENTSTORE_S3_BUCKET"] else { fail("the cluster environment is not set") }
let arguments = Array(CommandLine.arguments.dropFirst())
var configuration = Store.Configuration()
configuration.controlSocket = false

do {
    let store = try Store(cluster: ClusterConfiguration(databaseURL: databaseURL, objectStoreEndpoint: endpoint, bucket: bucket),
                          configuration: configuration)
    switch (arguments.first, arguments.count) {
    case ("increment", 3):
        let key = arguments[1]
        guard let count = Int(arguments[2]) else { fail("COUNT must be a number") }
        for _ in 0 ..< count {
            try store.write { transaction in
                let current = try transaction.record(forKey: key).map { Int(String(decoding: $0.value, as: UTF8.self)) ?? 0 } ?? 0
                try transaction.setRecord(Record(value: Data(String(current + 1).utf8)), forKey: key)
            }
        }
    case ("write", 2):
        let prefix = arguments[1]
        var index = 0
        while true {
            let key = "\(prefix)/\(index)"
            let bytes = Data("\(key) \(UUID())".utf8) + Data(repeating: UInt8(index % 251), count: index.isMultiple(of: 3) ? 70_000 : 100)
            let digest = try store.put(bytes)
            try store.write { try $0.setRecord(Record(value: Data(key.utf8), references: [digest]), forKey: key) }
            // One write(2) per line, after the commit returned: a line present means acknowledged.
            let line = "acked \(key) \(digest.hex)\n"
            _ = line.withCString { write(1, $0, strlen($0)) }
            index += 1
        }
    case ("stream", 3):
        let file = URL(fileURLWithPath: arguments[1]), exported = URL(fileURLWithPath: arguments[2])
        // Both paths once on 4 MiB first, so the code and pools they touch once are resident.
        let warmUp = try store.put(Data((0 ..< 4 << 20).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }))
        try store.export(warmUp, to: exported)
        let (digest, putPeak) = try measuringPeak { try store.put(contentsOf: file) }
        let ((), exportPeak) = try measuringPeak { try store.export(digest, to: exported) }
        print("\(digest.hex) \(putPeak) \(exportPeak)")
    default:
        fail("usage: ClusterWorkload increment KEY COUNT | write PREFIX | stream FILE EXPORTED")
    }
    try store.close()
} catch {
    fail("\(error)")
}
