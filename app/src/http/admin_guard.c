/* admin_guard.c - failed admin attempts per client address (admin_guard.h).
 *
 * A fixed table of ADMIN_GUARD_ADDRESSES records, each compared on the
 * whole key, so two addresses never share a record (a table that kept one
 * record per hash slot let 127.0.0.9 and 127.0.1.102 reset each other's
 * count: app_admin_guard/colliding_addresses_both_wait). It is scanned
 * whole: an admin request looks (a few microseconds), no claim does.
 *
 * No allocation: everything is static, guarded by one mutex. */
#include "http/admin_guard.h"

#include <pthread.h>
#include <string.h>

#include "http/peer.h"

typedef struct record {
    unsigned char key[PEER_KEY_LEN]; /* all zero: a free record */
    unsigned failures;
    int64_t until_ms; /* waits before this time */
    int64_t last_ms;  /* its last failure */
} record;

static struct {
    pthread_mutex_t mu;
    record rec[ADMIN_GUARD_ADDRESSES];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Which of two records to reuse first: a free one, then one not waiting,
 * then the one whose last failure is oldest. */
static int reuse_before(const record *a, const record *b, int64_t now_ms)
{
    int a_free = a->key[0] == 0, b_free = b->key[0] == 0;
    if (a_free != b_free)
        return a_free;
    int a_idle = a->until_ms <= now_ms, b_idle = b->until_ms <= now_ms;
    if (a_idle != b_idle)
        return a_idle;
    return a->last_ms < b->last_ms;
}

/* The record of key, or with create a fresh one (reuse_before's pick);
 * NULL when absent and not created. */
static record *find(const unsigned char key[PEER_KEY_LEN], int create, int64_t now_ms)
{
    record *pick = &g.rec[0];
    for (size_t i = 0; i < ADMIN_GUARD_ADDRESSES; i++) {
        if (memcmp(g.rec[i].key, key, PEER_KEY_LEN) == 0)
            return &g.rec[i];
        if (reuse_before(&g.rec[i], pick, now_ms))
            pick = &g.rec[i];
    }
    if (!create)
        return NULL;
    memset(pick, 0, sizeof *pick);
    memcpy(pick->key, key, PEER_KEY_LEN);
    return pick;
}

int admin_guard_check(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s)
{
    unsigned char key[PEER_KEY_LEN];
    int verdict = 0;

    if (peer_key(addr, key) != 0)
        return 0;
    pthread_mutex_lock(&g.mu);
    const record *r = find(key, 0, now_ms);
    if (r != NULL && r->until_ms > now_ms) {
        int64_t ms = r->until_ms - now_ms;
        *retry_s = ms <= 1000 ? 1u : (unsigned)((ms + 999) / 1000);
        verdict = -1;
    }
    pthread_mutex_unlock(&g.mu);
    return verdict;
}

void admin_guard_failed(const struct sockaddr *addr, int64_t now_ms)
{
    unsigned char key[PEER_KEY_LEN];

    if (peer_key(addr, key) != 0)
        return;
    pthread_mutex_lock(&g.mu);
    record *r = find(key, 1, now_ms);
    r->last_ms = now_ms;
    r->failures++;
    if (r->failures >= ADMIN_GUARD_FREE_TRIES) {
        unsigned doublings = r->failures - ADMIN_GUARD_FREE_TRIES;
        int64_t wait = ADMIN_GUARD_FIRST_WAIT_MS;
        while (doublings-- > 0 && wait < ADMIN_GUARD_MAX_WAIT_MS)
            wait *= 2;
        r->until_ms = now_ms + (wait > ADMIN_GUARD_MAX_WAIT_MS ? ADMIN_GUARD_MAX_WAIT_MS : wait);
    }
    pthread_mutex_unlock(&g.mu);
}

void admin_guard_succeeded(const struct sockaddr *addr)
{
    unsigned char key[PEER_KEY_LEN];

    if (peer_key(addr, key) != 0)
        return;
    pthread_mutex_lock(&g.mu);
    record *r = find(key, 0, 0);
    if (r != NULL)
        memset(r, 0, sizeof *r); /* free again */
    pthread_mutex_unlock(&g.mu);
}
