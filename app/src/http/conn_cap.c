/* conn_cap.c - connections per client key (conn_cap.h): an open-addressing
 * table with linear probing, at most half full, and backward-shift
 * deletion (no tombstones, so a long run cannot slow the probes down). */
#include "http/conn_cap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    unsigned char key[PEER_KEY_LEN]; /* key[0] == 0: empty */
    unsigned count;
} slot;

static struct {
    pthread_mutex_t mu;
    slot *tab; /* owned; NULL: stopped or no cap */
    size_t mask;
    unsigned per_client;
    atomic_uint refused;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t home(const unsigned char key[PEER_KEY_LEN])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < PEER_KEY_LEN; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return (size_t)h & g.mask;
}

int conn_cap_start(unsigned per_client, unsigned max_connections, char *errbuf, size_t errlen)
{
    size_t n = 16;
    g.per_client = per_client;
    atomic_store(&g.refused, 0);
    if (per_client == 0)
        return 0;
    /* Every counted client holds a connection: at most max_connections
     * keys, so twice that keeps the table at most half full. */
    while (n < 2 * (size_t)max_connections)
        n *= 2;
    g.tab = calloc(n, sizeof *g.tab);
    if (g.tab == NULL) {
        snprintf(errbuf, errlen, "out of memory for the per-address connection table");
        return -1;
    }
    g.mask = n - 1;
    return 0;
}

void conn_cap_stop(void)
{
    free(g.tab);
    g.tab = NULL;
}

int conn_cap_enter(const struct sockaddr *peer, unsigned char key[PEER_KEY_LEN])
{
    if (g.tab == NULL || peer_is_trusted(peer) || peer_key(peer, key) != 0)
        return 0;
    int verdict = 1;
    pthread_mutex_lock(&g.mu);
    size_t i = home(key);
    /* The probe ends: libmicrohttpd admits at most max_connections before
     * this is called, so the table is at most half full. */
    while (g.tab[i].key[0] != 0 && memcmp(g.tab[i].key, key, PEER_KEY_LEN) != 0)
        i = (i + 1) & g.mask;
    if (g.tab[i].count >= g.per_client) {
        verdict = -1;
    } else {
        memcpy(g.tab[i].key, key, PEER_KEY_LEN);
        g.tab[i].count++;
    }
    pthread_mutex_unlock(&g.mu);
    if (verdict < 0)
        atomic_fetch_add(&g.refused, 1);
    return verdict;
}

void conn_cap_leave(const unsigned char key[PEER_KEY_LEN])
{
    if (g.tab == NULL)
        return;
    pthread_mutex_lock(&g.mu);
    size_t i = home(key);
    while (g.tab[i].key[0] != 0 && memcmp(g.tab[i].key, key, PEER_KEY_LEN) != 0)
        i = (i + 1) & g.mask;
    if (g.tab[i].key[0] != 0 && --g.tab[i].count == 0) {
        /* Backward shift: pull every later entry of the run whose home
         * lies outside (i, j] into the hole, so lookups still find it. */
        size_t j = i;
        for (;;) {
            memset(&g.tab[i], 0, sizeof g.tab[i]);
            for (;;) {
                j = (j + 1) & g.mask;
                if (g.tab[j].key[0] == 0)
                    goto done;
                size_t h = home(g.tab[j].key);
                if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                    break;
            }
            g.tab[i] = g.tab[j];
            i = j;
        }
    }
done:
    pthread_mutex_unlock(&g.mu);
}

unsigned conn_cap_refused_take(void)
{
    return atomic_exchange(&g.refused, 0);
}
