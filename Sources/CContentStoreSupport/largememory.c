#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "CContentStoreSupport.h"

// Why huge pages: the blob index is one table of tens of megabytes probed at random. With 4 KiB
// pages each probe of a large table is also a TLB miss (a page walk that itself misses the cache),
// so the same work costs more the larger the store; 2 MiB pages take that term away and fault the
// table in 512 times fewer steps. Linux gives them to a mapping that asks (MADV_HUGEPAGE) when
// transparent huge pages are in `madvise` or `always` mode; elsewhere the advice is ignored.
static const size_t huge_page = (size_t)2 << 20;

size_t cs_large_allocation_size(size_t length) {
    return (length + huge_page - 1) / huge_page * huge_page;
}

void *cs_large_allocate(size_t length) {
    size_t rounded = cs_large_allocation_size(length);
    if (rounded < length) return NULL;
#if defined(__linux__)
    // Over-map by a huge page so an aligned range of `rounded` bytes fits, then return the rest.
    size_t mapped = rounded + huge_page;
    if (mapped < rounded) return NULL;
    uint8_t *raw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *aligned = (uint8_t *)(((uintptr_t)raw + huge_page - 1) & ~(uintptr_t)(huge_page - 1));
    if (aligned > raw) munmap(raw, (size_t)(aligned - raw));
    size_t tail = (size_t)(raw + mapped - (aligned + rounded));
    if (tail > 0) munmap(aligned + rounded, tail);
    (void)madvise(aligned, rounded, MADV_HUGEPAGE);  // advice: without it the memory still works
    return aligned;
#else
    void *memory = NULL;
    if (posix_memalign(&memory, huge_page, rounded) != 0) return NULL;
    return memset(memory, 0, rounded);
#endif
}

void cs_large_free(void *memory, size_t length) {
    if (memory == NULL) return;
#if defined(__linux__)
    munmap(memory, cs_large_allocation_size(length));
#else
    (void)length;
    free(memory);
#endif
}
