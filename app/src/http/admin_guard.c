/* admin_guard.c - failed admin attempts per client address (IPv6 by its
 * /64), and for all addresses together (admin_guard.h).
 *
 * The addresses: a fixed table of ADMIN_GUARD_ADDRESSES records, each
 * compared on the whole key, so two addresses never share a record (a table
 * that kept one record per hash slot let 127.0.0.9 and 127.0.1.102 reset
 * each other's count: app_admin_guard/colliding_addresses_both_wait). It is
 * scanned whole: only a wrong guess looks (a few microseconds), the right
 * token never does. When the table is full, the record whose last failure
 * is oldest is reused.
 *
 * All addresses: a bucket of ADMIN_GUARD_GLOBAL_PER_S failures refilled at
 * that rate, kept in thousandths so that the refill is exact in whole ms.
 * Only wrong guesses take from it: a right token never waits on it.
 *
 * No allocation: everything is static, guarded by one mutex. */
#include "http/admin_guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#define KEY_LEN 9 /* the family byte, then 4 (IPv4) or 8 (an IPv6 /64) address bytes, zero-padded */
#define MILLI 1000

typedef struct record {
    unsigned char key[KEY_LEN]; /* all zero: a free record */
    unsigned failures;
    int64_t until_ms; /* blocked before this time */
    int64_t last_ms;  /* its last failure: the oldest is reused first */
} record;

static struct {
    pthread_mutex_t mu;
    record rec[ADMIN_GUARD_ADDRESSES];
    int64_t budget_milli; /* the global bucket, in thousandths of a failure */
    int64_t budget_ms;    /* when it was last refilled; 0: never (full) */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The address, not the port (every connection has a new one). An
 * IPv4-mapped IPv6 address is its IPv4 address: a dual-stack listener
 * must not give one client two records. */
static int key_of(const struct sockaddr *addr, unsigned char key[KEY_LEN])
{
    memset(key, 0, KEY_LEN);
    if (addr == NULL)
        return -1;
    if (addr->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)addr)->sin_addr, 4);
        return 0;
    }
    if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            key[0] = 4;
            memcpy(key + 1, a6->s6_addr + 12, 4);
        } else {
            /* The /64: a host is handed a whole /64 (SLAAC, most
             * providers), and could otherwise guess from 2^64 addresses. */
            key[0] = 6;
            memcpy(key + 1, a6->s6_addr, 8);
        }
        return 0;
    }
    return -1;
}

/* The record of key, or with create a fresh one (a free record, else the
 * one whose last failure is oldest); NULL when absent and not created. */
static record *find(const unsigned char key[KEY_LEN], int create)
{
    record *oldest = &g.rec[0];
    for (size_t i = 0; i < ADMIN_GUARD_ADDRESSES; i++) {
        if (memcmp(g.rec[i].key, key, KEY_LEN) == 0)
            return &g.rec[i];
        if (g.rec[i].key[0] == 0 ? oldest->key[0] != 0 || g.rec[i].last_ms < oldest->last_ms
                                 : oldest->key[0] != 0 && g.rec[i].last_ms < oldest->last_ms)
            oldest = &g.rec[i];
    }
    if (!create)
        return NULL;
    memset(oldest, 0, sizeof *oldest);
    memcpy(oldest->key, key, KEY_LEN);
    return oldest;
}

static void budget_refill(int64_t now_ms)
{
    const int64_t full = (int64_t)ADMIN_GUARD_GLOBAL_PER_S * MILLI;
    if (g.budget_ms == 0) {
        g.budget_milli = full;
    } else if (now_ms > g.budget_ms) {
        /* ADMIN_GUARD_GLOBAL_PER_S failures a second = that many thousandths a ms. */
        int64_t add = (now_ms - g.budget_ms) * ADMIN_GUARD_GLOBAL_PER_S;
        g.budget_milli = add >= full - g.budget_milli ? full : g.budget_milli + add;
    }
    if (now_ms > g.budget_ms)
        g.budget_ms = now_ms;
}

static unsigned whole_seconds(int64_t ms)
{
    return ms <= 1000 ? 1u : (unsigned)((ms + 999) / 1000);
}

admin_guard_verdict admin_guard_failed(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s)
{
    unsigned char key[KEY_LEN];
    admin_guard_verdict v = ADMIN_GUARD_OPEN;

    pthread_mutex_lock(&g.mu);
    budget_refill(now_ms);
    int known = key_of(addr, key) == 0;
    record *r = known ? find(key, 0) : NULL;
    if (r != NULL && r->until_ms > now_ms) {
        v = ADMIN_GUARD_ADDRESS;
    } else if (g.budget_milli < MILLI) {
        v = ADMIN_GUARD_GLOBAL;
        /* Until one whole failure has flowed back in. */
        *retry_s = whole_seconds((MILLI - g.budget_milli + ADMIN_GUARD_GLOBAL_PER_S - 1) / ADMIN_GUARD_GLOBAL_PER_S);
    } else {
        g.budget_milli -= MILLI;
    }
    /* A new address is remembered only within the global budget: filling
     * the table then takes longer than the longest wait (admin_guard.h). */
    if (known && (r != NULL || v == ADMIN_GUARD_OPEN)) {
        if (r == NULL)
            r = find(key, 1);
        r->last_ms = now_ms;
        r->failures++;
        if (r->failures >= ADMIN_GUARD_FREE_TRIES) {
            unsigned doublings = r->failures - ADMIN_GUARD_FREE_TRIES;
            int64_t wait = ADMIN_GUARD_FIRST_WAIT_MS;
            while (doublings-- > 0 && wait < ADMIN_GUARD_MAX_WAIT_MS)
                wait *= 2;
            r->until_ms = now_ms + (wait > ADMIN_GUARD_MAX_WAIT_MS ? ADMIN_GUARD_MAX_WAIT_MS : wait);
        }
        if (v == ADMIN_GUARD_ADDRESS)
            *retry_s = whole_seconds(r->until_ms - now_ms);
    }
    pthread_mutex_unlock(&g.mu);
    return v;
}

void admin_guard_succeeded(const struct sockaddr *addr)
{
    unsigned char key[KEY_LEN];

    pthread_mutex_lock(&g.mu);
    record *r = key_of(addr, key) == 0 ? find(key, 0) : NULL;
    if (r != NULL)
        memset(r, 0, sizeof *r); /* free again */
    pthread_mutex_unlock(&g.mu);
}
