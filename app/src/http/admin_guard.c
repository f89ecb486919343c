/* admin_guard.c - failed admin attempts per client address (IPv6 by its
 * /64), and for all addresses together (admin_guard.h).
 *
 * The addresses: a fixed table of ADMIN_GUARD_ADDRESSES records, found by
 * hash with chaining and compared on the whole address, so two addresses
 * never share a record. The table it replaces kept one record per hash
 * slot: 127.0.0.9 and 127.0.1.102 shared slot 69, and alternating them
 * reset each other's count (200 of 200 wrong guesses answered 401, never
 * 429; app_admin_guard/colliding_addresses_both_wait). When the table is
 * full, the record whose last failure is oldest is reused.
 *
 * All addresses: a bucket of ADMIN_GUARD_GLOBAL_PER_S failures refilled at
 * that rate, kept in thousandths so that the refill is exact in whole ms.
 * Only wrong guesses take from it: a right token never waits on it.
 *
 * No allocation: everything is static, guarded by one mutex (a few
 * compares per admin request; admin requests are rare). Indexes are stored
 * plus one, so that 0 (the static zero) means "none". */
#include "http/admin_guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#define KEY_LEN 17 /* the family byte, then 4 (IPv4) or 16 (IPv6) address bytes, zero-padded */
#define N_BUCKETS (ADMIN_GUARD_ADDRESSES * 2)
#define MILLI 1000

typedef struct record {
    unsigned char key[KEY_LEN];
    unsigned failures;
    int64_t until_ms; /* blocked before this time */
    int32_t chain;    /* next record of the bucket, or of the free list */
    int32_t newer;    /* the age list, by last failure: toward the newest */
    int32_t older;    /* ... toward the oldest */
} record;

static struct {
    pthread_mutex_t mu;
    record rec[ADMIN_GUARD_ADDRESSES];
    int32_t bucket[N_BUCKETS];
    int32_t newest, oldest; /* ends of the age list */
    int32_t free_list;      /* records given up (a success) */
    int32_t grown;          /* records [1, grown] have been used */
    int64_t budget_milli;   /* the global bucket, in thousandths of a failure */
    int64_t budget_ms;      /* when it was last refilled; 0: never (full) */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define REC(i) (&g.rec[(i) - 1])

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

static uint32_t bucket_of(const unsigned char key[KEY_LEN])
{
    uint32_t h = 2166136261u; /* FNV-1a: chains compare whole keys, so the hash only spreads them */
    for (int i = 0; i < KEY_LEN; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % N_BUCKETS;
}

static int32_t find(const unsigned char key[KEY_LEN])
{
    for (int32_t i = g.bucket[bucket_of(key)]; i != 0; i = REC(i)->chain)
        if (memcmp(REC(i)->key, key, KEY_LEN) == 0)
            return i;
    return 0;
}

static void age_unlink(int32_t i)
{
    record *r = REC(i);
    if (r->newer != 0)
        REC(r->newer)->older = r->older;
    else
        g.newest = r->older;
    if (r->older != 0)
        REC(r->older)->newer = r->newer;
    else
        g.oldest = r->newer;
    r->newer = r->older = 0;
}

static void age_push_newest(int32_t i)
{
    record *r = REC(i);
    r->older = g.newest;
    r->newer = 0;
    if (g.newest != 0)
        REC(g.newest)->newer = i;
    g.newest = i;
    if (g.oldest == 0)
        g.oldest = i;
}

/* Takes record i out of its bucket and the age list; the caller reuses or frees it. */
static void forget(int32_t i)
{
    int32_t *link = &g.bucket[bucket_of(REC(i)->key)];
    while (*link != i)
        link = &REC(*link)->chain;
    *link = REC(i)->chain;
    age_unlink(i);
    memset(REC(i), 0, sizeof(record));
}

/* A fresh record for key: a never-used one, a freed one, or, when the
 * table is full, the one whose last failure is oldest. */
static int32_t remember(const unsigned char key[KEY_LEN])
{
    int32_t i;
    if (g.grown < ADMIN_GUARD_ADDRESSES) {
        i = ++g.grown;
    } else if (g.free_list != 0) {
        i = g.free_list;
        g.free_list = REC(i)->chain;
    } else {
        i = g.oldest;
        forget(i);
    }
    record *r = REC(i);
    memset(r, 0, sizeof *r);
    memcpy(r->key, key, KEY_LEN);
    uint32_t b = bucket_of(key);
    r->chain = g.bucket[b];
    g.bucket[b] = i;
    age_push_newest(i);
    return i;
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
    int32_t i = known ? find(key) : 0;
    if (i != 0 && REC(i)->until_ms > now_ms) {
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
    if (known && (i != 0 || v == ADMIN_GUARD_OPEN)) {
        if (i == 0)
            i = remember(key);
        record *r = REC(i);
        age_unlink(i);
        age_push_newest(i);
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
    int32_t i = key_of(addr, key) == 0 ? find(key) : 0;
    if (i != 0) {
        forget(i);
        REC(i)->chain = g.free_list;
        g.free_list = i;
    }
    pthread_mutex_unlock(&g.mu);
}
