#define _GNU_SOURCE
#include <sched.h>
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
    // Returns at once when the word no longer holds `key`; spurious returns are the caller's to handle.
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, key, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
#else
    (void)word; (void)key; (void)timeout_ns;
    sched_yield();
#endif
}

void cs_event_notify_all(uint32_t *word) {
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#endif
}
