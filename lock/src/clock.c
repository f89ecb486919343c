/* clock.c - the library's clock (CLOCK_BOOTTIME, else CLOCK_MONOTONIC) in
 * milliseconds, its conversion for condition variables, and an EINTR-safe
 * sleep. */
#include "dlock_internal.h"

#include <errno.h>
#include <time.h>

/* Never wall-clock: a lease measured on a clock that NTP or an operator can
 * step backwards would look valid for longer than it is. And BOOTTIME
 * rather than MONOTONIC where there is one: MONOTONIC stops while the host
 * is suspended (laptop lid, VM paused and resumed, hibernation) while the
 * Redis nodes' clocks run on, so after a 30 s suspend a 10 s lease measured
 * on MONOTONIC would still look valid although its keys expired long ago
 * and another client may hold the resource. BOOTTIME counts the suspended
 * time. A kernel without it (Linux < 2.6.39, other systems) answers EINVAL:
 * fall back to MONOTONIC for good, which is right everywhere but across a
 * suspend. */
static clockid_t lease_clock(void)
{
#ifdef CLOCK_BOOTTIME
    static _Atomic int boottime = -1; /* -1 unknown, 0 no, 1 yes */
    struct timespec ts;
    int known = atomic_load(&boottime);

    if (known < 0) {
        known = clock_gettime(CLOCK_BOOTTIME, &ts) == 0;
        atomic_store(&boottime, known);
    }
    if (known)
        return CLOCK_BOOTTIME;
#endif
    return CLOCK_MONOTONIC;
}

int64_t dlock_now_ms(void)
{
    struct timespec ts;

    if (clock_gettime(lease_clock(), &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dlock__cond_deadline(int64_t at_ms, struct timespec *ts)
{
    int64_t wait = at_ms - dlock_now_ms();

    /* The two clocks differ by the time spent suspended, so an instant is
     * carried over as "this long from now", not as a number. */
    if (wait < 0)
        wait = 0;
    if (clock_gettime(CLOCK_MONOTONIC, ts) != 0) {
        ts->tv_sec = 0;
        ts->tv_nsec = 0;
    }
    ts->tv_sec += (time_t)(wait / 1000);
    ts->tv_nsec += (long)(wait % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void dlock__sleep_ms(int64_t ms)
{
    struct timespec req, rem;

    if (ms <= 0)
        return;
    req.tv_sec = (time_t)(ms / 1000);
    req.tv_nsec = (long)(ms % 1000) * 1000000L;
    /* A signal must not cut a backoff short into a busy retry loop. */
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}
