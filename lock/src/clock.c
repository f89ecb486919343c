/* clock.c - CLOCK_MONOTONIC milliseconds and an EINTR-safe sleep. */
#include "dlock_internal.h"

#include <errno.h>
#include <time.h>

/* Monotonic, never wall-clock: a lease measured on a clock that NTP or an
 * operator can step backwards would look valid for longer than it is. */
int64_t dlock_now_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
