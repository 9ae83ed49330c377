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

/// An event count: a 32-bit word that threads wait on until a notification changes it. A waiter
/// takes the key first, then checks its condition, then waits with the key, so a notification
/// between the check and the wait is not lost (the wait returns at once). Linux sleeps on the word
/// (futex); elsewhere a mutex and a condition variable do the kernel's compare-and-sleep.
typedef struct cs_event cs_event;
/// A new event count, or NULL when memory or a lock cannot be had. Free it with `cs_event_destroy`.
cs_event *cs_event_create(void);
void cs_event_destroy(cs_event *event);
/// Returns the current key.
uint32_t cs_event_key(const cs_event *event);
/// Sleeps while the word still holds `key`, for at most `timeout_ns` (< 0: no limit). May return
/// early or spuriously: re-check, then wait again.
void cs_event_wait(cs_event *event, uint32_t key, int64_t timeout_ns);
/// Changes the word and wakes every waiter (none asleep: no system call).
void cs_event_notify_all(cs_event *event);

/// Tells the CPU the caller is in a spin-wait loop (x86 `pause`, ARM `yield`): the loop then
/// yields pipeline resources to a sibling hyper-thread and leaves it without a memory-order stall.
static inline void cs_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/// Memory for one large allocation (the blob index's table, a checkpoint's body at open): zeroed, aligned to 2 MiB and, on Linux, backed by
/// transparent huge pages where the kernel allows them. `length` is rounded up to a multiple of
/// 2 MiB (`cs_large_allocation_size`). NULL when the memory cannot be had. Free it with
/// `cs_large_free` and the same `length`.
void *cs_large_allocate(size_t length);
void cs_large_free(void *memory, size_t length);
size_t cs_large_allocation_size(size_t length);

/// Starts loading the cache line at `address` for a write soon (no fault, no effect on results):
/// a loop over keys scattered through a large table issues it a few keys ahead, so the misses of
/// several keys overlap instead of following one another.
static inline void cs_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

/// A listening Unix-domain socket at `path` (close-on-exec, mode 0600 set before it listens).
/// Returns the descriptor, or -1 with `errno` (ENAMETOOLONG when `path` does not fit sun_path).
int cs_unix_listen(const char *path, int backlog);
/// A connected Unix-domain socket to `path` (close-on-exec), or -1 with `errno`.
int cs_unix_connect(const char *path);
/// The user id of the process at the other end of a connected Unix-domain socket (SO_PEERCRED on
/// Linux, getpeereid elsewhere). Returns 0, or -1 with `errno`.
int cs_peer_uid(int fd, uint32_t *uid);

#endif
