internal import COpenSSLCrypto

/// SHA-256 through OpenSSL's EVP interface, which uses the CPU's SHA extensions where present.
package enum SHA256 {
    /// Fetched once: an implicit fetch on every call costs more than hashing a small blob.
    nonisolated(unsafe) private static let algorithm: OpaquePointer = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()

    /// One-shot, with no EVP context: see `contentstore_sha256` in COpenSSLCrypto's shim.h.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> Digest {
        var output: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &output) { contentstore_sha256(bytes.baseAddress, bytes.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        return withUnsafeBytes(of: output) { Digest(bytes: $0) }
    }

    /// An incremental hasher for content that arrives in pieces (streamed files, chunked blobs).
    package struct Hasher: ~Copyable {
        private let context: OpaquePointer

        package init() {
            context = EVP_MD_CTX_new()
            EVP_DigestInit_ex(context, SHA256.algorithm, nil)
        }

        deinit { EVP_MD_CTX_free(context) }

        package mutating func update(_ bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress, bytes.count > 0 else { return }
            EVP_DigestUpdate(context, base, bytes.count)
        }

        package consuming func finalize() -> Digest {
            // On the stack: an array here would be an allocation per hash.
            var output: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            var length: UInt32 = 0
            _ = withUnsafeMutableBytes(of: &output) { EVP_DigestFinal_ex(context, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), &length) }
            return withUnsafeBytes(of: output) { Digest(bytes: $0) }
        }
    }
}
