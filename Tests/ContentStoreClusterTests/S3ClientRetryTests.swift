#if canImport(Glibc)
import Glibc
#endif
import ContentStore
import Foundation
import Synchronization
import Testing
@testable import ContentStoreCluster

/// Retries the real gateway cannot be made to need, against a real HTTP server on loopback that
/// answers as a service under contention would.
@Suite struct S3ClientRetryTests {
    /// A conditional put answered 409 `ConditionalRequestConflict` every time is asked again after
    /// each retry delay, then fails with `unavailable` naming the key — it does not loop forever.
    @Test func aConditionalPutThatKeepsConflictingEndsUnavailable() async throws {
        let server = try ConflictingServer()
        defer { server.stop() }
        var configuration = S3Client.Configuration(
            endpoint: URL(string: "http://127.0.0.1:\(server.port)")!, bucket: "conflicts", region: "us-east-1",
            accessKeyID: "TESTKEY", secretAccessKey: "test-secret", requestTimeout: .seconds(20))
        configuration.retryDelays = [.milliseconds(20), .milliseconds(40)]
        let client = try S3Client(configuration: configuration)
        defer { Task { try? await client.shutdown() } }
        let error = await #expect(throws: StoreError.self) { try await client.put("packs/ab/key.pack", bytes: [1, 2, 3], ifAbsent: true) }
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("conflicts/packs/ab/key.pack") == true)
        #expect(!"\(error!)".contains("test-secret"))
        #expect(server.conflicts == 3)
    }
}

/// Answers the conditional-put probe as a supporting service does (201, then 412, then 204 for the
/// delete) and every other PUT with 409 `ConditionalRequestConflict`; counts those.
private final class ConflictingServer: Sendable {
    let port: UInt16
    private let listener: Int32
    /// Conflicts answered, and probe PUTs seen (on whichever connection they come).
    private let counts = Mutex((conflicts: 0, probes: 0))
    var conflicts: Int { counts.withLock { $0.conflicts } }

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard bound, listen(listener, 16) == 0 else { throw StoreError(code: .io, message: "cannot listen on loopback: errno \(errno)") }
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread { self.serve(connection) }
            }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var pending = [UInt8]()
        while true {
            guard let end = Self.headerEnd(pending) else {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                pending += buffer[..<count]
                continue
            }
            let head = String(decoding: pending[..<end], as: UTF8.self)
            let lines = head.split(separator: "\r\n")
            let request = lines.first?.split(separator: " ") ?? []
            let bodyLength = lines.first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            guard pending.count >= end + 4 + bodyLength else {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                pending += buffer[..<count]
                continue
            }
            pending.removeFirst(end + 4 + bodyLength)
            let method = request.first.map(String.init) ?? "", path = request.count > 1 ? String(request[1]) : ""
            let status: String, body: String
            if path.contains("/" + S3Client.probePrefix) {
                let probes = method == "PUT" ? counts.withLock { $0.probes += 1; return $0.probes } : 0
                status = method == "DELETE" ? "204 No Content" : probes == 1 ? "200 OK" : "412 Precondition Failed"
                body = ""
            } else {
                counts.withLock { $0.conflicts += 1 }
                status = "409 Conflict"
                body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>ConditionalRequestConflict</Code><Message>busy</Message></Error>"
            }
            let response = Array("HTTP/1.1 \(status)\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: application/xml\r\n\r\n\(body)".utf8)
            guard write(connection, response, response.count) == response.count else { return }
        }
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0 ... bytes.count - 4 where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}
