#define _GNU_SOURCE
#include <fcntl.h>
#include "CContentStoreSupport.h"

int cs_start_write_back(int descriptor, int64_t offset, int64_t length) {
#if defined(__linux__)
    return sync_file_range(descriptor, offset, length, SYNC_FILE_RANGE_WRITE);
#else
    (void)descriptor; (void)offset; (void)length;
    return 0;
#endif
}
