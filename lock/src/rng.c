/* rng.c - the per-client random generator (xorshift128+, seeded from the
 * kernel): the jitter of the retry backoff (retry.c) and of an open
 * breaker's probe delay (breaker.c). Not for tokens: those come from the
 * kernel directly (token.c). */
#include "dlock_internal.h"

/* Seeded from the kernel per client: no rand() and no global state, so two
 * processes started together do not draw the same delays, and threads with
 * their own clients never share (or race on) a generator. */
void dlock__rng_seed(dlock_client *c)
{
    uint64_t seed[2] = {0, 0};

    /* Jitter needs no secrecy: without kernel randomness, or from all zeros
     * (where xorshift128+ must not start), the clock will do. */
    if (dlock__random_bytes(seed, sizeof(seed)) != 0 || (seed[0] == 0 && seed[1] == 0))
        seed[0] = 0x9e3779b97f4a7c15ull ^ (uint64_t)dlock_now_ms();
    c->rng[0] = seed[0];
    c->rng[1] = seed[1];
}

/* xorshift128+; client mutex held. */
static uint64_t rng_next(dlock_client *c)
{
    uint64_t s1 = c->rng[0];
    const uint64_t s0 = c->rng[1];

    c->rng[0] = s0;
    s1 ^= s1 << 23;
    c->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return c->rng[1] + s0;
}

/* Uniform in [lo, hi]; client mutex held. */
int64_t dlock__rng_range(dlock_client *c, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(rng_next(c) % (uint64_t)(hi - lo + 1));
}
