#include <openssl/evp.h>
#include <openssl/sha.h>

/// The SHA-256 of `count` bytes at `bytes`, into the 32 bytes at `digest`, with a context on the
/// stack. Why not EVP: for a small blob, EVP's per-call context (two allocations, the provider's
/// init and free, all cold between commits) cost more than the hashing; these functions run the
/// same assembly (SHA extensions where present). Deprecated in OpenSSL 3, not removed; the
/// deprecation is silenced here, where it is the point.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static inline void contentstore_sha256(const void *bytes, size_t count, unsigned char *digest) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, bytes, count);
    SHA256_Final(digest, &context);
}
#pragma clang diagnostic pop
