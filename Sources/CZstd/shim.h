// ZSTD_createThreadPool / ZSTD_CCtx_refThreadPool (one worker pool for every context) are in the
// static-linking section; the system library exports them.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>
// ZDICT_trainFromBuffer_fastCover (chunk dictionaries) is in the static-linking section.
#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
