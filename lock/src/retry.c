/* retry.c - the backoff between acquisition attempts: exponential with full
 * jitter, or a fixed delay with jitter (drawn from the client's generator,
 * rng.c), and the sleep that waits it out without the client mutex. */
#include "dlock_internal.h"

/* The one retry rule of every acquire loop (plain, queued, Redlock queued,
 * multi). Another attempt is worth it when:
 * - the key was held (TAKEN);
 * - the validity ran out before the grant (EXPIRED: a slow round, not the
 *   resource, said no);
 * - too few nodes answered, when the client asks for it. */
int dlock__should_retry(const dlock_client *c, dlock_err rc)
{
    if (rc == DLOCK_ERR_TAKEN || rc == DLOCK_ERR_EXPIRED)
        return 1;
    return c->retry_unavailable && dlock_err_is_unavailable(rc);
}

/* Delay before retry number attempt+1; client mutex held.
 *
 * Why random: the distlock page's "retry after a random delay" - clients
 * that failed together and retry after the same delay collide again and
 * split the votes forever. Full jitter (uniform in [1, cap], cap doubling
 * per attempt up to retry_max_ms) spreads them the most for the least total
 * wait; the 1 ms floor keeps a losing client from hammering Redis. */
int64_t dlock__backoff_ms(dlock_client *c, unsigned attempt)
{
    int64_t cap;

    if (c->retry_fixed_ms > 0) {
        int64_t d = dlock__rng_range(c, (int64_t)c->retry_fixed_ms - c->retry_jitter_ms,
                              (int64_t)c->retry_fixed_ms + c->retry_jitter_ms);
        return d < 1 ? 1 : d;
    }
    cap = c->retry_max_ms;
    /* Shift only while it cannot overflow; past 2^30 the ceiling rules anyway. */
    if (attempt < 30 && ((int64_t)c->retry_base_ms << attempt) < cap)
        cap = (int64_t)c->retry_base_ms << attempt;
    return dlock__rng_range(c, 1, cap < 1 ? 1 : cap);
}

void dlock__backoff_sleep(dlock_client *c, unsigned attempt, int64_t now, int64_t deadline_ms)
{
    int64_t sleep_ms = dlock__backoff_ms(c, attempt);

    if (sleep_ms > deadline_ms - now)
        sleep_ms = deadline_ms - now;
    /* Sleep without the mutex: other threads sharing the client (and the
     * watchdog renewing our other locks) must not stall behind a waiter's
     * backoff. */
    pthread_mutex_unlock(&c->mu);
    dlock__sleep_ms(sleep_ms);
    pthread_mutex_lock(&c->mu);
    /* A sentinel node that lost its master during the last attempt gets
     * its answer now, without the mutex, rather than failing the next. */
    dlock__sentinel_await(c, deadline_ms);
}
