// zstd for the comparison peers. ContentStore's own CZstd module is internal to the engine, so the
// harness declares its own (same library, pkg-config libzstd) for the SQLite and file-per-key peers.
#include <zstd.h>
