/* clock.c - the library's clock (CLOCK_BOOTTIME, else CLOCK_MONOTONIC) in
 * milliseconds. Also here: the check that a deadline is an instant on it,
 * the deadline of a relative wait, its conversion for condition variables,
 * an EINTR-safe sleep, and the drift allowance taken off every validity. */
#include "dlock_internal.h"

#include <errno.h>
#include <sys/time.h>
#include <time.h>

/* Never wall-clock: a lease measured on a clock that NTP or an operator can
 * step backwards would look valid for longer than it is. And BOOTTIME
 * rather than MONOTONIC where there is one. MONOTONIC stops while the host
 * is suspended (laptop lid, VM paused and resumed, hibernation), while the
 * Redis nodes' clocks run on. After a 30 s suspend, a 10 s lease measured
 * on MONOTONIC would still look valid, although its keys expired long ago
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

/* The instant the library was loaded (for a program linked with it: before
 * its main ran). No deadline this process built from dlock_now_ms() can lie
 * before it, so one that does was not built that way: most likely a
 * relative wait ("2000") passed where an absolute instant belongs, which
 * would silently mean "try once" (see dlock__deadline_check). */
static _Atomic int64_t loaded_ms = 0;

__attribute__((constructor)) static void note_load_time(void)
{
    atomic_store(&loaded_ms, dlock_now_ms());
}

int dlock__deadline_check(int64_t deadline_ms, const char *op, char *errbuf)
{
    int64_t since = atomic_load(&loaded_ms);
    int64_t now;

    /* <= 0 is the explicit "try once" (dlock_try_acquire passes INT64_MIN);
     * it can be no clock reading, and as a relative wait 0 means the same.
     * The slack keeps "a little in the past" legal in a process that has
     * just started (dlock_now_ms() - 1000 as "try once", a deadline taken
     * by a parent just before it forked). Yet a relative wait passed on
     * a host up for more than a few minutes still lies far before it. */
    if (deadline_ms <= 0 || since == 0 || deadline_ms >= since - DLOCK_DEADLINE_SLACK_MS)
        return 0;
    now = dlock_now_ms();
    dlock__errf(errbuf,
                "%s: deadline_ms is an absolute instant on dlock_now_ms()'s clock "
                "(CLOCK_BOOTTIME); %lld is %lld ms in the past, over a minute before this "
                "process loaded libdlock - use %s_for for a relative wait, or "
                "dlock_now_ms() + wait",
                op, (long long)deadline_ms, (long long)(now - deadline_ms), op);
    return -1;
}

int64_t dlock__deadline_after(int64_t wait_ms)
{
    int64_t now = dlock_now_ms();

    /* No wait is "try once"; INT64_MIN is the plainest deadline that says
     * so and passes dlock__deadline_check. */
    if (wait_ms <= 0)
        return INT64_MIN;
    /* A wait so long that now + wait_ms would overflow is "for ever". */
    return wait_ms > INT64_MAX - now ? INT64_MAX : now + wait_ms;
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

struct timeval dlock__tv_ms(int64_t ms)
{
    struct timeval tv;

    if (ms < 0)
        ms = 0;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
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

/* The distlock page's CLOCK_DRIFT: clocks of the client and of the Redis
 * nodes run at slightly different rates, so a key may expire on a node a
 * little before the client's TTL says. A fraction of the TTL plus a floor
 * (for small TTLs, timer granularity) is taken off the validity. */
int64_t dlock__drift_ms(const dlock_client *c, uint32_t ttl_ms)
{
    return (int64_t)((double)ttl_ms * c->drift_factor) + c->drift_min_ms;
}

int64_t dlock__drift_span_ms(const dlock_client *c, int64_t span_ms)
{
    return dlock__drift_ms(c, span_ms > UINT32_MAX ? UINT32_MAX
                                                   : (uint32_t)(span_ms > 0 ? span_ms : 0));
}

int dlock__ttl_check(uint32_t ttl_ms, const char *op, char *errbuf)
{
    if (ttl_ms == 0) {
        dlock__errf(errbuf, "%s: ttl_ms is 0", op);
        return -1;
    }
    /* A negative number cast to uint32_t is about 4.29e9: refused here
     * with the limit, not handed to Redis as a 49-day key. */
    if (ttl_ms > DLOCK_MAX_TTL_MS) {
        dlock__errf(errbuf, "%s: ttl_ms %u is over the limit of %u ms (24 h); for longer, "
                    "renew a shorter TTL with dlock_auto_renew", op, ttl_ms, DLOCK_MAX_TTL_MS);
        return -1;
    }
    return 0;
}
