// The small-blob dictionary as the engine makes it (session 12, Docs/benchmarks/analysis.md §32),
// against the engine's frames without one: frame size, compression and decode CPU of 4 KiB text.
//
//   python3 text-blocks.py 3000 blocks
//   cc -O2 -o dictionary dictionary.c -lzstd && ./dictionary
//
// Training as LocalEngine+SmallBlobDictionary: the first 256 blocks (1 MiB) less every fourth (held
// out), fastCover k=256 d=8 f=18, 110 KiB; frames through a ZSTD_CDict built with minMatch 7 and
// raw literals (and, for comparison, loadDictionary into the context); the last 2,000 blocks are
// measured, decode with a reused context and a ZSTD_DDict, best of 15 passes (thread CPU time).
#define ZSTD_STATIC_LINKING_ONLY
#define ZDICT_STATIC_LINKING_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zdict.h>
#include <zstd.h>
enum { blockCount = 3000, blockSize = 4096, measuredFrom = 1000, passes = 15 };
static unsigned char blocks[blockCount][blockSize];
static unsigned char frames[blockCount][blockSize + 512];
static size_t frameSizes[blockCount];
static double cpuSeconds(void) { struct timespec now; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now); return now.tv_sec + now.tv_nsec * 1e-9; }
static void check(size_t r, const char *w) { if (ZSTD_isError(r)) { fprintf(stderr, "%s: %s\n", w, ZSTD_getErrorName(r)); exit(1); } }
static void measure(const char *label, const void *dict, size_t dictSize, int minMatch, int raw, int viaCDict) {
    ZSTD_CCtx *c = ZSTD_createCCtx(); ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_DDict *ddict = dict ? ZSTD_createDDict(dict, dictSize) : NULL;
    ZSTD_CDict *cdict = NULL;
    if (dict && viaCDict) {
        ZSTD_compressionParameters cp = ZSTD_getCParams(3, blockSize, dictSize);
        if (minMatch) cp.minMatch = minMatch;
        cdict = ZSTD_createCDict_advanced(dict, dictSize, ZSTD_dlm_byCopy, ZSTD_dct_auto, cp, ZSTD_defaultCMem);
    }
    double cstart = cpuSeconds();
    for (int i = 0; i < blockCount; i++) {
        ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
        check(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3), "level");
        if (minMatch && !cdict) check(ZSTD_CCtx_setParameter(c, ZSTD_c_minMatch, minMatch), "mm");
        if (raw) check(ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_disable), "lit");
        if (cdict) check(ZSTD_CCtx_refCDict(c, cdict), "ref");
        else if (dict) check(ZSTD_CCtx_loadDictionary(c, dict, dictSize), "load");
        check(ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0), "id");
        frameSizes[i] = ZSTD_compress2(c, frames[i], sizeof frames[i], blocks[i], blockSize); check(frameSizes[i], "compress");
    }
    double cper = (cpuSeconds() - cstart) / blockCount * 1e6;
    unsigned char out[blockSize]; double best = 1e9;
    for (int p = 0; p < passes; p++) {
        double s = cpuSeconds();
        for (int i = measuredFrom; i < blockCount; i++) {
            size_t w = ZSTD_decompress_usingDDict(d, out, blockSize, frames[i], frameSizes[i], ddict);
            if (w != blockSize || memcmp(out, blocks[i], blockSize)) { fprintf(stderr, "%s wrong\n", label); exit(1); }
        }
        double per = (cpuSeconds() - s) / (blockCount - measuredFrom) * 1e6; if (per < best) best = per;
    }
    size_t total = 0; for (int i = measuredFrom; i < blockCount; i++) total += frameSizes[i];
    printf("%-44s frame %5.0f B  compress %6.2f us  decode %5.2f us\n", label, (double)total / (blockCount - measuredFrom), cper, best);
    ZSTD_freeDDict(ddict); ZSTD_freeCDict(cdict); ZSTD_freeCCtx(c); ZSTD_freeDCtx(d);
}
int main(void) {
    for (int i = 0; i < blockCount; i++) { char path[64]; snprintf(path, sizeof path, "blocks/%05d", i); FILE *f = fopen(path, "rb"); fread(blocks[i], 1, blockSize, f); fclose(f); }
    size_t sizes[256]; for (int i = 0; i < 256; i++) sizes[i] = blockSize;
    /* the engine's training: 1 MiB sample less every 4th block (held out), fastCover k=256 d=8 f=18, 110 KiB */
    static unsigned char training[192][blockSize]; int n = 0;
    for (int i = 0; i < 256; i++) if (i % 4 != 0) memcpy(training[n++], blocks[i], blockSize);
    void *dict = malloc(110 << 10);
    ZDICT_fastCover_params_t p; memset(&p, 0, sizeof p);
    p.k = 256; p.d = 8; p.f = 18; p.accel = 1; p.zParams.compressionLevel = 3; p.zParams.dictID = 0x31445343;
    size_t size = ZDICT_trainFromBuffer_fastCover(dict, 110 << 10, training, sizes, n, p);
    if (ZDICT_isError(size)) { printf("train fail\n"); return 1; }
    for (int round = 0; round < 3; round++) {
        measure("engine before: minMatch 7", NULL, 0, 7, 0, 0);
        measure("engine after: 110K dict, mm7, raw literals", dict, size, 7, 1, 1);
    }
}
