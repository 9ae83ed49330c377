// Frame size and decode CPU of 4 KiB blocks under the zstd parameters and trained dictionaries
// Docs/benchmarks/analysis.md §25 compares (session 11, issue 19: cached small reads).
//
//   python3 text-blocks.py 3000 blocks      # the point-read blocks of `compare`, 4 KiB each
//   cc -O2 -o frames frames.c -lzstd && ./frames blocks
//
// The first 1,000 blocks are the training set (dictionaries train on the first 256), the other
// 2,000 are compressed at level 3 and decoded with a reused context (a DDict for dictionaries, as
// the engine does); decode time is thread CPU time per block, the best of 25 passes.
#define ZSTD_STATIC_LINKING_ONLY
#define ZDICT_STATIC_LINKING_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zdict.h>
#include <zstd.h>

enum { blockCount = 3000, blockSize = 4096, measuredFrom = 1000, trainingBlocks = 256, passes = 25 };
static unsigned char blocks[blockCount][blockSize];
static unsigned char frames[blockCount][blockSize + 512];
static size_t frameSizes[blockCount];

static double cpuSeconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return now.tv_sec + now.tv_nsec * 1e-9;
}

static void check(size_t result, const char *what) {
    if (ZSTD_isError(result)) { fprintf(stderr, "%s: %s\n", what, ZSTD_getErrorName(result)); exit(1); }
}

// Compresses every block with the given minMatch (0: the level's own), literals Huffman-coded or
// raw, with `dictionary` (loaded into the context, so minMatch applies) when given; decodes the
// measured blocks and prints their mean frame size and decode CPU.
static void measure(const char *label, const void *dictionary, size_t dictionarySize, int minMatch, int rawLiterals) {
    ZSTD_CCtx *compressor = ZSTD_createCCtx();
    ZSTD_DCtx *decompressor = ZSTD_createDCtx();
    ZSTD_DDict *ddict = dictionary ? ZSTD_createDDict(dictionary, dictionarySize) : NULL;
    for (int i = 0; i < blockCount; i++) {
        ZSTD_CCtx_reset(compressor, ZSTD_reset_session_and_parameters);
        check(ZSTD_CCtx_setParameter(compressor, ZSTD_c_compressionLevel, 3), "level");
        if (minMatch) check(ZSTD_CCtx_setParameter(compressor, ZSTD_c_minMatch, minMatch), "minMatch");
        if (rawLiterals) check(ZSTD_CCtx_setParameter(compressor, ZSTD_c_literalCompressionMode, ZSTD_ps_disable), "literals");
        if (dictionary) check(ZSTD_CCtx_loadDictionary(compressor, dictionary, dictionarySize), "dictionary");
        frameSizes[i] = ZSTD_compress2(compressor, frames[i], sizeof frames[i], blocks[i], blockSize);
        check(frameSizes[i], "compress");
    }
    unsigned char output[blockSize];
    double best = 1e9;
    for (int pass = 0; pass < passes; pass++) {
        double start = cpuSeconds();
        for (int i = measuredFrom; i < blockCount; i++) {
            size_t written = ZSTD_decompress_usingDDict(decompressor, output, blockSize, frames[i], frameSizes[i], ddict);
            if (written != blockSize || memcmp(output, blocks[i], blockSize) != 0) { fprintf(stderr, "%s: wrong bytes\n", label); exit(1); }
        }
        double perBlock = (cpuSeconds() - start) / (blockCount - measuredFrom) * 1e6;
        if (perBlock < best) best = perBlock;
    }
    size_t total = 0;
    for (int i = measuredFrom; i < blockCount; i++) total += frameSizes[i];
    printf("%-34s frame %5.0f B (%.3f)  decode %5.2f us\n", label, (double)total / (blockCount - measuredFrom),
           (double)total / (blockCount - measuredFrom) / blockSize, best);
    ZSTD_freeDDict(ddict);
    ZSTD_freeCCtx(compressor);
    ZSTD_freeDCtx(decompressor);
}

int main(int argc, char **argv) {
    const char *directory = argc > 1 ? argv[1] : "blocks";
    for (int i = 0; i < blockCount; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%05d", directory, i);
        FILE *file = fopen(path, "rb");
        if (!file || fread(blocks[i], 1, blockSize, file) != blockSize) { fprintf(stderr, "cannot read %s\n", path); return 1; }
        fclose(file);
    }
    measure("level 3 (minMatch 4)", NULL, 0, 0, 0);
    measure("level 3, minMatch 7 (the engine's)", NULL, 0, 7, 0);
    measure("minMatch 7, raw literals", NULL, 0, 7, 1);
    size_t sampleSizes[trainingBlocks];
    for (int i = 0; i < trainingBlocks; i++) sampleSizes[i] = blockSize;
    const size_t capacities[] = {16 << 10, 64 << 10, 110 << 10};
    for (int c = 0; c < 3; c++) {
        void *dictionary = malloc(capacities[c]);
        ZDICT_fastCover_params_t parameters;
        memset(&parameters, 0, sizeof parameters);
        parameters.zParams.compressionLevel = 3;
        parameters.d = 8;
        parameters.steps = 4;
        parameters.accel = 1;
        size_t size = ZDICT_optimizeTrainFromBuffer_fastCover(dictionary, capacities[c], blocks, sampleSizes, trainingBlocks, &parameters);
        if (ZDICT_isError(size)) { fprintf(stderr, "training: %s\n", ZDICT_getErrorName(size)); return 1; }
        char label[64];
        snprintf(label, sizeof label, "%zu KiB dictionary", size >> 10);
        measure(label, dictionary, size, 0, 0);
        snprintf(label, sizeof label, "%zu KiB dictionary, minMatch 7", size >> 10);
        measure(label, dictionary, size, 7, 0);
        snprintf(label, sizeof label, "%zu KiB dict., minMatch 6, raw lit.", size >> 10);
        measure(label, dictionary, size, 6, 1);
        snprintf(label, sizeof label, "%zu KiB dict., minMatch 7, raw lit.", size >> 10);
        measure(label, dictionary, size, 7, 1);
        free(dictionary);
    }
    return 0;
}
