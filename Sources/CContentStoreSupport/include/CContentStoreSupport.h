#ifndef CCONTENTSTORE_SUPPORT_H
#define CCONTENTSTORE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// Extends a CRC32C (Castagnoli) over `length` bytes. Start with `crc = 0`.
/// Uses the SSE4.2 `crc32` instruction when the CPU has it, a slicing-by-8 table otherwise.
uint32_t cs_crc32c_extend(uint32_t crc, const void *data, size_t length);

#endif
