#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include "CContentStoreSupport.h"

// Linux sleeps on the word itself (futex). Elsewhere, a mutex and a condition variable stand in for
// the kernel's compare-and-sleep; CS_EVENT_CONDVAR selects them on Linux too, to test that path.
#if defined(__linux__) && !defined(CS_EVENT_CONDVAR)
#define CS_EVENT_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define CS_EVENT_FUTEX 0
#include <pthread.h>
#endif

struct cs_event {
    uint32_t word;
    /// Threads asleep (or about to sleep): a notifier that sees none spares the system call.
    uint32_t sleepers;
#if !CS_EVENT_FUTEX
    pthread_mutex_t lock;
    pthread_cond_t changed;
#endif
};

cs_event *cs_event_create(void) {
    cs_event *event = calloc(1, sizeof(cs_event));
    if (event == NULL) return NULL;
#if !CS_EVENT_FUTEX
    if (pthread_mutex_init(&event->lock, NULL) != 0) {
        free(event);
        return NULL;
    }
    if (pthread_cond_init(&event->changed, NULL) != 0) {
        pthread_mutex_destroy(&event->lock);
        free(event);
        return NULL;
    }
#endif
    return event;
}

void cs_event_destroy(cs_event *event) {
#if !CS_EVENT_FUTEX
    pthread_cond_destroy(&event->changed);
    pthread_mutex_destroy(&event->lock);
#endif
    free(event);
}

uint32_t cs_event_key(const cs_event *event) {
    return __atomic_load_n(&event->word, __ATOMIC_SEQ_CST);
}

#if CS_EVENT_FUTEX

void cs_event_wait(cs_event *event, uint32_t key, int64_t timeout_ns) {
    struct timespec timeout = { .tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000 };
    // Counted before the kernel compares the word with `key`, so a notifier that changed the word
    // either sees the count (and wakes) or changed it before the comparison (which then fails).
    __atomic_add_fetch(&event->sleepers, 1, __ATOMIC_SEQ_CST);
    // Returns at once when the word no longer holds `key`; spurious returns are the caller's to handle.
    syscall(SYS_futex, &event->word, FUTEX_WAIT_PRIVATE, key, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
    __atomic_sub_fetch(&event->sleepers, 1, __ATOMIC_SEQ_CST);
}

void cs_event_notify_all(cs_event *event) {
    __atomic_add_fetch(&event->word, 1, __ATOMIC_SEQ_CST);
    // Most notifications (a writer committing alone) find no one asleep: spare the system call.
    if (__atomic_load_n(&event->sleepers, __ATOMIC_SEQ_CST) != 0) {
        syscall(SYS_futex, &event->word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    }
}

#else

/// `timeout_ns` from now on the clock `pthread_cond_timedwait` measures (the realtime clock).
static struct timespec deadline_after(int64_t timeout_ns) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t nanoseconds = (int64_t)now.tv_nsec + timeout_ns % 1000000000;
    struct timespec deadline = {
        .tv_sec = now.tv_sec + (time_t)(timeout_ns / 1000000000) + (time_t)(nanoseconds / 1000000000),
        .tv_nsec = (long)(nanoseconds % 1000000000),
    };
    return deadline;
}

void cs_event_wait(cs_event *event, uint32_t key, int64_t timeout_ns) {
    pthread_mutex_lock(&event->lock);
    // Counted before the word is compared with `key`, both sequentially consistent: a notifier that
    // changed the word after the comparison sees the count and takes the lock, which this thread
    // holds until the condition wait releases it, so the broadcast finds it waiting.
    __atomic_add_fetch(&event->sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&event->word, __ATOMIC_SEQ_CST) == key) {
        if (timeout_ns < 0) {
            pthread_cond_wait(&event->changed, &event->lock);
        } else {
            struct timespec deadline = deadline_after(timeout_ns);
            pthread_cond_timedwait(&event->changed, &event->lock, &deadline);
        }
    }
    __atomic_sub_fetch(&event->sleepers, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&event->lock);
}

void cs_event_notify_all(cs_event *event) {
    __atomic_add_fetch(&event->word, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&event->sleepers, __ATOMIC_SEQ_CST) != 0) {
        pthread_mutex_lock(&event->lock);
        pthread_cond_broadcast(&event->changed);
        pthread_mutex_unlock(&event->lock);
    }
}

#endif
