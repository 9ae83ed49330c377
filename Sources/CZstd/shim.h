#include <zstd.h>
#include <zstd_errors.h>
// ZDICT_trainFromBuffer_fastCover (chunk dictionaries) is in the static-linking section.
#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
