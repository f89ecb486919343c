/* admin_guard.c - failed admin attempts per client address (admin_guard.h).
 *
 * A fixed table, no allocation per client: an address hashes to one slot,
 * and a different address landing there takes the slot over. An attacker
 * with many addresses can thus evict its own record, but each address still
 * gets only ADMIN_GUARD_FREE_TRIES fast guesses before it waits, and a
 * 128-bit-strong token needs far more than any number of addresses gives. */
#include "http/admin_guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#define SLOTS 256

typedef struct slot {
    unsigned char key[16]; /* IPv4 (4 bytes) or IPv6 (16), zero-padded */
    unsigned failures;
    int64_t until_ms;      /* blocked before this time */
} slot;

static slot table[SLOTS];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

/* The address bytes (not the port: every connection has a new one). */
static int key_of(const struct sockaddr *addr, unsigned char key[16])
{
    memset(key, 0, 16);
    if (addr == NULL)
        return -1;
    if (addr->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)(const void *)addr)->sin_addr, 4);
        return 0;
    }
    if (addr->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

static slot *slot_of(const unsigned char key[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return &table[h % SLOTS];
}

int admin_guard_blocked(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s)
{
    unsigned char key[16];
    int blocked = 0;

    if (key_of(addr, key) != 0)
        return 0;
    pthread_mutex_lock(&table_mu);
    slot *s = slot_of(key);
    if (memcmp(s->key, key, 16) == 0 && s->until_ms > now_ms) {
        blocked = 1;
        *retry_s = (unsigned)((s->until_ms - now_ms + 999) / 1000);
    }
    pthread_mutex_unlock(&table_mu);
    return blocked;
}

void admin_guard_failed(const struct sockaddr *addr, int64_t now_ms)
{
    unsigned char key[16];

    if (key_of(addr, key) != 0)
        return;
    pthread_mutex_lock(&table_mu);
    slot *s = slot_of(key);
    if (memcmp(s->key, key, 16) != 0) {
        memcpy(s->key, key, 16);
        s->failures = 0;
        s->until_ms = 0;
    }
    s->failures++;
    if (s->failures >= ADMIN_GUARD_FREE_TRIES) {
        unsigned doublings = s->failures - ADMIN_GUARD_FREE_TRIES;
        int64_t wait = ADMIN_GUARD_FIRST_WAIT_MS;
        while (doublings-- > 0 && wait < ADMIN_GUARD_MAX_WAIT_MS)
            wait *= 2;
        if (wait > ADMIN_GUARD_MAX_WAIT_MS)
            wait = ADMIN_GUARD_MAX_WAIT_MS;
        s->until_ms = now_ms + wait;
    }
    pthread_mutex_unlock(&table_mu);
}

void admin_guard_succeeded(const struct sockaddr *addr)
{
    unsigned char key[16];

    if (key_of(addr, key) != 0)
        return;
    pthread_mutex_lock(&table_mu);
    slot *s = slot_of(key);
    if (memcmp(s->key, key, 16) == 0) {
        s->failures = 0;
        s->until_ms = 0;
    }
    pthread_mutex_unlock(&table_mu);
}
