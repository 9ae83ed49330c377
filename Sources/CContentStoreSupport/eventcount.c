#define _GNU_SOURCE
#include <time.h>
#include "CContentStoreSupport.h"
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

uint32_t cs_event_key(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}

void cs_event_wait(uint32_t *word, uint32_t key, int64_t timeout_ns) {
#if defined(__linux__)
    struct timespec timeout = { .tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000 };
    // Counted before the kernel compares the word with `key`, so a notifier that changed the word
    // either sees the count (and wakes) or changed it before the comparison (which then fails).
    __atomic_add_fetch(word + 1, 1, __ATOMIC_SEQ_CST);
    // Returns at once when the word no longer holds `key`; spurious returns are the caller's to handle.
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, key, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
    __atomic_sub_fetch(word + 1, 1, __ATOMIC_SEQ_CST);
#else
    // No futex: sleep a short while and let the caller re-check (a poll, at most 20 µs late).
    (void)word; (void)key;
    int64_t nap = timeout_ns < 0 || timeout_ns > 20000 ? 20000 : timeout_ns;
    struct timespec pause = { .tv_sec = 0, .tv_nsec = nap };
    nanosleep(&pause, NULL);
#endif
}

void cs_event_notify_all(uint32_t *word) {
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
#if defined(__linux__)
    // Most notifications (a writer committing alone) find no one asleep: spare the system call.
    if (__atomic_load_n(word + 1, __ATOMIC_SEQ_CST) != 0) {
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    }
#endif
}
