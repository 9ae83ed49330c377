// The event count's condition-variable path, which macOS and other systems without a futex run,
// built here with CS_EVENT_CONDVAR on Linux too (`make test` builds and runs this). Waiters wait
// for a counter to reach each value a notifier sets; a lost wake-up leaves a waiter asleep with no
// timeout, and the alarm then fails the run. Also: a timed wait returns unnotified, a wait with a
// stale key returns at once. Exit 0 when all hold.
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "CContentStoreSupport.h"

enum { NOTIFICATIONS = 200000, WAITERS = 8 };
static cs_event *event;
static unsigned counter;

static void *waiter(void *unused) {
    (void)unused;
    for (unsigned wanted = 1; wanted <= NOTIFICATIONS; wanted++) {
        for (;;) {
            uint32_t key = cs_event_key(event);
            if (__atomic_load_n(&counter, __ATOMIC_SEQ_CST) >= wanted) break;
            cs_event_wait(event, key, -1);
        }
    }
    return NULL;
}

static double milliseconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e3 + (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

int main(void) {
    alarm(60);
    event = cs_event_create();
    if (event == NULL) return 1;
    pthread_t threads[WAITERS];
    for (int i = 0; i < WAITERS; i++) pthread_create(&threads[i], NULL, waiter, NULL);
    for (unsigned value = 1; value <= NOTIFICATIONS; value++) {
        __atomic_store_n(&counter, value, __ATOMIC_SEQ_CST);
        cs_event_notify_all(event);
        if (value % 64 == 0) sched_yield();
    }
    for (int i = 0; i < WAITERS; i++) pthread_join(threads[i], NULL);

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    cs_event_wait(event, cs_event_key(event), 20000000);
    double timed = milliseconds_since(&start);

    uint32_t stale = cs_event_key(event);
    cs_event_notify_all(event);
    clock_gettime(CLOCK_MONOTONIC, &start);
    cs_event_wait(event, stale, -1);
    double staleWait = milliseconds_since(&start);

    cs_event_destroy(event);
    printf("event count, condition-variable path: %d waiters saw %d notifications; a 20 ms timed wait took %.1f ms; a stale-key wait %.3f ms\n",
           WAITERS, NOTIFICATIONS, timed, staleWait);
    return staleWait < 1000 ? 0 : 1;
}
