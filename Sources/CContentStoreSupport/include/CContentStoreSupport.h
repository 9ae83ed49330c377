#ifndef CCONTENTSTORE_SUPPORT_H
#define CCONTENTSTORE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// Extends a CRC32C (Castagnoli) over `length` bytes. Start with `crc = 0`.
/// Uses the SSE4.2 `crc32` instruction when the CPU has it, a slicing-by-8 table otherwise.
uint32_t cs_crc32c_extend(uint32_t crc, const void *data, size_t length);

/// `sync_file_range(SYNC_FILE_RANGE_WRITE)` on Linux (starts write-back of the range, waits for
/// nothing, makes nothing durable); does nothing elsewhere. Returns 0 or -1 with `errno`.
int cs_start_write_back(int descriptor, int64_t offset, int64_t length);

#endif
