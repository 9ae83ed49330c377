// System calls Swift's Glibc module does not import (they need _GNU_SOURCE).
#pragma once

/// Atomically exchanges two paths (renameat2 with RENAME_EXCHANGE): the Linux counterpart of the
/// directory swap `-[NSFileManager replaceItemAtURL:...]` does on Apple platforms. 0 or -1 (errno).
int bench_exchange_paths(const char *first, const char *second);

/// Copies up to `length` bytes from `input`'s offset to `output`'s (copy_file_range: in the kernel,
/// sharing extents where the file system can). Bytes copied, 0 at end of input, or -1 (errno).
long bench_copy_file_range(int input, int output, unsigned long length);
