// The small-blob dictionaries need ZSTD_createCDict_advanced and ZSTD_c_literalCompressionMode, both
// in the static-linking section (exported by the shared library since 1.4).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>
// ZDICT_trainFromBuffer_fastCover (chunk dictionaries) is in the static-linking section.
#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
