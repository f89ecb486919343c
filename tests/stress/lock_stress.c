/* lock_stress.c - libdlock under threads, for the TSan build: one client
 * shared by several threads, per-thread clients with watchdog renewal, and
 * release/free racing the watchdog. Exit 0 iff every check held. */
#include "dlock.h"
#include "procs.h"
#include "stress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int stress_failures;

#define NODES 3
#define SHARED_THREADS 4
#define SHARED_ITERS 40
#define RENEW_THREADS 4

static redis_proc nodes[NODES];
static const char *addrs[NODES];

static dlock_client *new_client(void)
{
    dlock_options o;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = NODES;
    /* Sanitizer builds run several times slower: generous timeouts keep
     * this a race detector, not a timing test. */
    o.command_timeout_ms = 1000;
    o.connect_timeout_ms = 1000;
    o.retry_unavailable = 1;
    if (dlock_client_new(&o, &c, err, sizeof(err)) != DLOCK_OK)
        fprintf(stderr, "dlock_client_new: %s\n", err);
    return c;
}

/* The counter lives on node 0 and is incremented non-atomically (GET, then
 * SET) under the lock: any overlap of two holders loses an increment. */
static long counter_get(void)
{
    char out[64];
    const char *get[] = {"GET", "stress:counter"};

    if (redis_cmd(&nodes[0], out, sizeof(out), 2, get) != 0 || strcmp(out, "(nil)") == 0)
        return 0;
    return strtol(out, NULL, 10);
}

static void counter_set(long v)
{
    char out[64], val[32];
    const char *set[] = {"SET", "stress:counter", val};

    snprintf(val, sizeof(val), "%ld", v);
    CHECK(redis_cmd(&nodes[0], out, sizeof(out), 3, set) == 0, "SET counter");
}

static atomic_long shared_successes;

static void *shared_worker(void *arg)
{
    dlock_client *c = arg;

    for (int i = 0; i < SHARED_ITERS; i++) {
        dlock_lock *l = NULL;
        dlock_err rc = dlock_acquire(c, "stress:shared", 5000, dlock_now_ms() + 10000, &l);

        CHECK(rc == DLOCK_OK, "shared acquire: %s", dlock_strerror(rc));
        if (rc != DLOCK_OK)
            continue;
        counter_set(counter_get() + 1);
        atomic_fetch_add(&shared_successes, 1);
        rc = dlock_release(c, l);
        CHECK(rc == DLOCK_OK, "shared release: %s", dlock_strerror(rc));
        dlock_lock_free(l);
    }
    return NULL;
}

static atomic_int lost_calls;

static void on_lost(const dlock_lock *l, dlock_err why, void *user)
{
    (void)l;
    (void)why;
    (void)user;
    atomic_fetch_add(&lost_calls, 1);
}

/* Each thread: its own client, a lock with a short TTL kept alive by the
 * watchdog well past that TTL, while the thread polls dlock_is_held and the
 * stats; then release (must stop renewal) or free without release. */
static void *renew_worker(void *arg)
{
    int idx = (int)(intptr_t)arg;
    char res[32];
    dlock_client *c = new_client();
    dlock_lock *l = NULL;
    dlock_renew_options ro = {.ttl_ms = 0, .on_lost = on_lost};
    dlock_stats st;
    dlock_err rc;

    if (c == NULL) {
        stress_failures++;
        return NULL;
    }
    snprintf(res, sizeof(res), "stress:renew:%d", idx);
    rc = dlock_acquire(c, res, 600, dlock_now_ms() + 5000, &l);
    CHECK(rc == DLOCK_OK, "renew acquire: %s", dlock_strerror(rc));
    if (rc == DLOCK_OK) {
        CHECK(dlock_auto_renew(c, l, &ro) == DLOCK_OK, "auto_renew");
        for (int i = 0; i < 30; i++) {
            CHECK(dlock_is_held(l), "lock %s lost while renewed", res);
            dlock_client_stats(c, &st);
            test_sleep_ms(50);
        }
        CHECK(dlock_lock_renewals(l) >= 2, "only %u renewals in 1.5 s at ttl 600",
              dlock_lock_renewals(l));
        if (idx % 2 == 0)
            CHECK(dlock_release(c, l) == DLOCK_OK, "release while renewing");
        dlock_lock_free(l); /* odd threads: free while the watchdog has it registered */
    }
    dlock_client_free(c);
    return NULL;
}

int main(void)
{
    pthread_t th[SHARED_THREADS + RENEW_THREADS];
    dlock_client *shared = NULL;
    long final;

    if (redis_start_n(nodes, NODES) != 0)
        return 2;
    for (int i = 0; i < NODES; i++)
        addrs[i] = nodes[i].addr;
    shared = new_client();
    if (shared == NULL) {
        redis_stop_n(nodes, NODES);
        return 2;
    }
    for (int i = 0; i < SHARED_THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, shared_worker, shared) == 0, "pthread_create");
    for (int i = 0; i < RENEW_THREADS; i++)
        CHECK(pthread_create(&th[SHARED_THREADS + i], NULL, renew_worker, (void *)(intptr_t)i) == 0,
              "pthread_create");
    for (int i = 0; i < SHARED_THREADS + RENEW_THREADS; i++)
        pthread_join(th[i], NULL);
    final = counter_get();
    CHECK(final == SHARED_THREADS * SHARED_ITERS, "counter %ld, expected %d", final,
          SHARED_THREADS * SHARED_ITERS);
    CHECK(atomic_load(&shared_successes) == SHARED_THREADS * SHARED_ITERS, "successes %ld",
          atomic_load(&shared_successes));
    CHECK(atomic_load(&lost_calls) == 0, "%d lost callbacks", atomic_load(&lost_calls));
    dlock_client_free(shared);
    redis_stop_n(nodes, NODES);
    printf("lock_stress: %s (%d failed checks)\n", stress_failures ? "FAIL" : "ok", stress_failures);
    return stress_failures ? 1 : 0;
}
